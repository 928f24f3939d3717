package chaosbench

import (
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SlowSyncFS returns fs with every Sync, SyncData and SyncTo of its files
// made delay() slower: a slow disk, for fault-injection benchmarks.
func SlowSyncFS(fs vfs.FS, delay func() time.Duration) vfs.FS {
	return &slowFS{FS: fs, delay: delay}
}

type slowFS struct {
	vfs.FS
	delay func() time.Duration
}

func (s *slowFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &slowFile{File: f, delay: s.delay}, nil
}

func (s *slowFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return s.wrap(s.FS.Create(name, c))
}

func (s *slowFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return s.wrap(s.FS.Open(name, opts...))
}

func (s *slowFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return s.wrap(s.FS.OpenReadWrite(name, c, opts...))
}

func (s *slowFS) OpenDir(name string) (vfs.File, error) {
	return s.wrap(s.FS.OpenDir(name))
}

func (s *slowFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return s.wrap(s.FS.ReuseForWrite(oldname, newname, c))
}

type slowFile struct {
	vfs.File
	delay func() time.Duration
}

func (f *slowFile) wait() {
	if d := f.delay(); d > 0 {
		time.Sleep(d)
	}
}

func (f *slowFile) Sync() error {
	f.wait()
	return f.File.Sync()
}

func (f *slowFile) SyncData() error {
	f.wait()
	return f.File.SyncData()
}

func (f *slowFile) SyncTo(length int64) (bool, error) {
	f.wait()
	return f.File.SyncTo(length)
}

// delayReread is how long DelayFromFile keeps a value it read.
const delayReread = 50 * time.Millisecond

// DelayFromFile returns a delay function for SlowSyncFS: the duration
// written in the file at path ("200ms"), read again at most every 50 ms;
// 0 while the file is absent, empty or not a positive duration.
func DelayFromFile(path string) func() time.Duration {
	var (
		mu    sync.Mutex
		read  time.Time
		delay time.Duration
	)
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); now.Sub(read) >= delayReread {
			read, delay = now, 0
			if b, err := os.ReadFile(path); err == nil {
				if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil && d > 0 {
					delay = d
				}
			}
		}
		return delay
	}
}
