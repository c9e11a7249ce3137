package harness

import (
	"bytes"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EventNames returns the file names of the inotify events read into b.
func EventNames(b []byte) []string {
	var names []string
	for off := 0; off+unix.SizeofInotifyEvent <= len(b); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[off]))
		end := min(off+unix.SizeofInotifyEvent+int(ev.Len), len(b))
		names = append(names, string(bytes.TrimRight(b[off+unix.SizeofInotifyEvent:end], "\x00")))
		off = end
	}
	return names
}
