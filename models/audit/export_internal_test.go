package audit

// SetChunkSize makes the exports requested from now on use chunks of n bytes.
func (x *Exports) SetChunkSize(n int) { x.chunkSize = n }
