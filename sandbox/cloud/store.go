package cloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gantry/sandbox/api"
)

// errNotFound: no such object.
var errNotFound = errors.New("not found")

// store keeps one JSON file per object: <DataDir>/objects/<kind>/<id>.json, written atomically
// (temporary file, fsync, rename, fsync of the directory). Every read goes to disk, so several
// servers (or a restarted one) on the same directory see the same objects. Callers serialise
// writes (Server.mu).
type store struct {
	dir string // <DataDir>/objects
}

func newStore(dataDir string) (*store, error) {
	dir := filepath.Join(dataDir, "objects")
	for _, k := range api.Kinds() {
		if err := os.MkdirAll(filepath.Join(dir, k.Name), 0o700); err != nil {
			return nil, fmt.Errorf("sandbox cloud: creating the data directory: %w", err)
		}
	}
	return &store{dir: dir}, nil
}

// path is the file of one object; the caller has checked that id is well formed (k.ValidID).
func (s *store) path(k api.Kind, id string) string {
	return filepath.Join(s.dir, k.Name, id+".json")
}

// exists reports whether any kind has an object with this id.
func (s *store) exists(k api.Kind, id string) bool {
	_, err := os.Stat(s.path(k, id))
	return err == nil
}

// load reads one object; errNotFound if there is none.
func (s *store) load(k api.Kind, id string) (*api.Object, error) {
	if !k.ValidID(id) {
		return nil, errNotFound
	}
	body, err := os.ReadFile(s.path(k, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", k.Name, id, err)
	}
	obj, err := api.DecodeObject(body)
	if err != nil {
		return nil, err
	}
	if obj.ID != id || obj.Kind != k.Name {
		return nil, fmt.Errorf("the file of %s %s holds %s %s", k.Name, id, obj.Kind, obj.ID)
	}
	return &obj, nil
}

// list reads every object of a kind, sorted by id.
func (s *store) list(k api.Kind) ([]*api.Object, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, k.Name))
	if err != nil {
		return nil, fmt.Errorf("listing %s objects: %w", k.Name, err)
	}
	var out []*api.Object
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !k.ValidID(id) {
			continue // temporary files and strays
		}
		obj, err := s.load(k, id)
		if errors.Is(err, errNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// save writes an object atomically.
func (s *store) save(k api.Kind, obj *api.Object) error {
	body, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s %s: %w", k.Name, obj.ID, err)
	}
	if err := writeAtomic(filepath.Join(s.dir, k.Name), obj.ID+".json", append(body, '\n')); err != nil {
		return fmt.Errorf("saving %s %s: %w", k.Name, obj.ID, err)
	}
	return nil
}

// writeAtomic writes dir/name as a whole or not at all: a temporary file, fsynced,
// renamed into place, then the directory fsynced. Every file of the cloud is written so.
func writeAtomic(dir, name string, body []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

// remove deletes an object's file.
func (s *store) remove(k api.Kind, id string) error {
	err := os.Remove(s.path(k, id))
	if errors.Is(err, fs.ErrNotExist) {
		return errNotFound
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s: %w", k.Name, id, err)
	}
	return syncDir(filepath.Join(s.dir, k.Name))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
