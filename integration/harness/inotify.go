package harness

import (
	"bytes"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Event is one inotify event: the watch descriptor it came from (which
// directory, for an instance watching several) and the file's name ("" for
// an event about the watched directory itself, as IN_IGNORED).
type Event struct {
	Wd   int32
	Name string
}

// Events returns the inotify events read into b.
func Events(b []byte) []Event {
	var evs []Event
	for off := 0; off+unix.SizeofInotifyEvent <= len(b); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[off]))
		end := min(off+unix.SizeofInotifyEvent+int(ev.Len), len(b))
		evs = append(evs, Event{ev.Wd, string(bytes.TrimRight(b[off+unix.SizeofInotifyEvent:end], "\x00"))})
		off = end
	}
	return evs
}

// EventNames returns the file names of the inotify events read into b.
func EventNames(b []byte) []string {
	var names []string
	for _, ev := range Events(b) {
		names = append(names, ev.Name)
	}
	return names
}
