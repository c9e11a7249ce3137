package farm

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/farm-hpc/farm/layout"
	"golang.org/x/sys/unix"
)

// SourcedByBash reports whether a single_case.sh that begins with head is
// sourced in the meta-job's bash worker, as META does: it has no #! line,
// or a bash or sh one ("#!/bin/bash", "#!/usr/bin/env bash", "#!/bin/sh").
// Any other #! line ("#!/usr/bin/env python3", "#!/bin/sh -e") makes farm
// run it as a program, which needs it executable.
func SourcedByBash(head []byte) bool {
	first, _, _ := bytes.Cut(head, []byte("\n"))
	return !bytes.HasPrefix(first, []byte("#!")) || bytes.Contains(first, []byte("bash")) || bytes.HasSuffix(bytes.TrimSpace(first), []byte("/sh"))
}

// ReadHead reads the first 256 bytes of the file path: enough for its #!
// line.
func ReadHead(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	head := make([]byte, 256)
	n, err := io.ReadFull(fh, head)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	return head[:n], err
}

// NotRunnable is the advice for a single_case.sh that farm runs as a
// program (SourcedByBash false, head its beginning) but may not execute:
// what makes farm run it so, and the two ways out. "" if it may.
func NotRunnable(path string, head []byte) string {
	if SourcedByBash(head) || unix.Access(path, unix.X_OK) == nil {
		return ""
	}
	first, _, _ := bytes.Cut(head, []byte("\n"))
	return fmt.Sprintf("%s:1: %q is not bash's #! line, so farm runs %s as a program, and it is not executable: make it executable (chmod +x %s), or make it a bash script (#!/bin/bash), which farm sources", layout.SingleCase, bytes.TrimSpace(first), layout.SingleCase, layout.SingleCase)
}
