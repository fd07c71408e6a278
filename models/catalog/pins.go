package catalog

import (
	"context"
	"sync"
)

// Pins remembers the module digest of each template version the first time it is
// loaded, so a tree edited in place (rather than published as a new version) is
// noticed: a workspace that planned against 1.0.0 must keep meaning the same code.
type Pins interface {
	// Pin records digest for name@version if none is recorded and returns the recorded one.
	Pin(ctx context.Context, name, version, digest string) (pinned string, err error)
}

// MemoryPins keeps pins in memory, for tests and development; its zero value is
// ready to use. Pins vanish with the process, so it does not guard production.
type MemoryPins struct {
	mu   sync.Mutex
	pins map[string]string
}

// Pin implements Pins.
func (p *MemoryPins) Pin(_ context.Context, name, version, digest string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pins == nil {
		p.pins = map[string]string{}
	}
	key := name + "@" + version
	if pinned, ok := p.pins[key]; ok {
		return pinned, nil
	}
	p.pins[key] = digest
	return digest, nil
}
