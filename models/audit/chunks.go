package audit

import (
	"context"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"gorm.io/gorm"

	"gantry/models/db"
	"gantry/models/keyring"
)

// An export is stored as numbered chunks, each chunkSize bytes of plaintext (the last
// one shorter, possibly empty), compressed with S2 (an export is JSON text: the database
// then writes a third of it) and sealed with AES-256-GCM under the export's data key. The
// nonce is the chunk's number and the associated data names the export, the number and
// whether the chunk is the last: chunks cannot be swapped, reordered, dropped from the
// end or moved to another export without failing to open.

func chunkNonce(aead cipher.AEAD, n int) []byte {
	nonce := make([]byte, aead.NonceSize())
	binary.BigEndian.PutUint64(nonce[len(nonce)-8:], uint64(n))
	return nonce
}

func chunkAAD(exportID string, n int, last bool) []byte {
	return fmt.Appendf(nil, "audit_export:%s:%d:%t", exportID, n, last)
}

// chunkWriter seals what is written to it chunk by chunk into audit_export_chunks.
type chunkWriter struct {
	ctx     context.Context
	db      *gorm.DB
	id      string
	aead    cipher.AEAD
	chunk   int // plaintext per chunk
	buf     []byte
	packed  []byte // the compressed chunk
	n       int
	written int64 // the file's size so far
}

func newChunkWriter(ctx context.Context, gdb *gorm.DB, e Export, dataKey []byte) (*chunkWriter, error) {
	aead, err := keyring.NewAEAD(dataKey)
	if err != nil {
		return nil, err
	}
	return &chunkWriter{ctx: ctx, db: gdb, id: e.ID, aead: aead, chunk: e.ChunkSize, buf: make([]byte, 0, e.ChunkSize+64<<10)}, nil
}

// Write buffers p and stores every full chunk that is certainly not the last.
func (w *chunkWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	w.written += int64(len(p))
	for len(w.buf) > w.chunk {
		if err := w.store(w.buf[:w.chunk], false); err != nil {
			return 0, err
		}
		w.buf = append(w.buf[:0], w.buf[w.chunk:]...)
	}
	return len(p), nil
}

// Close stores the last chunk.
func (w *chunkWriter) Close() error { return w.store(w.buf, true) }

func (w *chunkWriter) store(plain []byte, last bool) error {
	w.packed = s2.Encode(w.packed[:cap(w.packed)], plain)
	sealed := w.aead.Seal(nil, chunkNonce(w.aead, w.n), w.packed, chunkAAD(w.id, w.n, last))
	if err := db.Conn(w.ctx, w.db).Exec("INSERT INTO audit_export_chunks (export_id, n, ciphertext) VALUES (?, ?, ?)", w.id, w.n, sealed).Error; err != nil {
		return fmt.Errorf("storing export chunk %d: %w", w.n, err)
	}
	w.n++
	return nil
}

// Reader returns export e's file, decrypted a chunk at a time, as an io.ReadSeeker of
// e's size: http.ServeContent answers Range requests from it reading only the chunks
// the range covers. e must be ready.
func (x *Exports) Reader(ctx context.Context, e Export) (io.ReadSeeker, error) {
	if e.Status != ExportReady || e.Size == nil {
		return nil, errors.New("the export is not ready")
	}
	dataKey, err := x.keys.DataKey(keyring.Sealed{KeyID: e.KeyID, WrappedKey: e.WrappedKey})
	if err != nil {
		return nil, err
	}
	aead, err := keyring.NewAEAD(dataKey)
	if err != nil {
		return nil, err
	}
	return &chunkReader{ctx: ctx, db: x.db, e: e, aead: aead, size: *e.Size, loaded: -1}, nil
}

type chunkReader struct {
	ctx    context.Context
	db     *gorm.DB
	e      Export
	aead   cipher.AEAD
	size   int64
	off    int64
	loaded int
	plain  []byte
}

func (r *chunkReader) lastChunk() int {
	if r.size == 0 {
		return 0
	}
	// The writer keeps a full final chunk as the last one: chunk k holds bytes
	// [k*size, (k+1)*size), and the last is the one holding the final byte.
	return int((r.size - 1) / int64(r.e.ChunkSize))
}

func (r *chunkReader) load(n int) error {
	if n == r.loaded {
		return nil
	}
	var sealed []byte
	if err := db.Conn(r.ctx, r.db).Raw("SELECT ciphertext FROM audit_export_chunks WHERE export_id = ? AND n = ?", r.e.ID, n).Row().Scan(&sealed); err != nil {
		return fmt.Errorf("reading export chunk %d: %w", n, db.Translate(err))
	}
	packed, err := r.aead.Open(sealed[:0], chunkNonce(r.aead, n), sealed, chunkAAD(r.e.ID, n, n == r.lastChunk()))
	if err != nil {
		return fmt.Errorf("export chunk %d does not open (altered or missing): %w", n, err)
	}
	plain, err := s2.Decode(r.plain[:cap(r.plain)], packed)
	if err != nil {
		return fmt.Errorf("export chunk %d does not decompress: %w", n, err)
	}
	r.plain, r.loaded = plain, n
	return nil
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	n := int(r.off / int64(r.e.ChunkSize))
	if err := r.load(n); err != nil {
		return 0, err
	}
	within := int(r.off - int64(n)*int64(r.e.ChunkSize))
	if within >= len(r.plain) {
		return 0, fmt.Errorf("export chunk %d is shorter than its place in the file", n)
	}
	c := copy(p, r.plain[within:])
	r.off += int64(c)
	return c, nil
}

func (r *chunkReader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.off + offset
	case io.SeekEnd:
		abs = r.size + offset
	default:
		return 0, errors.New("invalid whence")
	}
	if abs < 0 {
		return 0, errors.New("negative position")
	}
	r.off = abs
	return abs, nil
}
