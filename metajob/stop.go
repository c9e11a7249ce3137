package metajob

import (
	"errors"
	"strconv"
)

// Messages a meta-job prints when it exits by itself, as META users know them.
const (
	MsgNoCases     = "No cases left; exiting."
	MsgSimpleDone  = "Exiting after processing one case (-1 option)"
	MsgFastFailure = "Too many failed (very short) cases - exiting"
	MsgNoRuntime   = "Not enough runtime left; exiting."
	MsgStopped     = "Stopped by a signal; exiting."
)

// ErrFastFailure is returned by Metajob.Run when fast-failure protection
// stopped the meta-job.
var ErrFastFailure = errors.New(MsgFastFailure)

// stop is why a loop of a meta-job ends; going while it goes on. What a
// loop does next is decided by its stop, never by the message it prints.
// The meta-job ends with the largest of its loops' stops (jobEnd): the
// order below, from the weakest, is the precedence.
type stop uint8

const (
	going           stop = iota
	stopHalted           // another loop ended with an error: the job ends with that
	stopFastFailure      // fast-failure protection: the job's first cases all failed quickly
	stopSimpleDone       // SIMPLE mode: its one case (and its retries) ran
	stopNoCases          // no case left
	stopNoRuntime        // not enough of the job's time left for another case
	stopSignal           // a stop signal (a time limit, a cancel)
	stopSuperseded       // the run is no longer the current one, or its cases were rescued
)

// line is the job's last line for why, as META users know it ("" for
// none); a superseded job's is owner.supersededLine.
func (why stop) line() string {
	switch why {
	case stopFastFailure:
		return MsgFastFailure
	case stopSimpleDone:
		return MsgSimpleDone
	case stopNoCases:
		return MsgNoCases
	case stopNoRuntime:
		return MsgNoRuntime
	case stopSignal:
		return MsgStopped
	case stopSuperseded:
		return MsgSuperseded
	}
	return ""
}

// String names why, for tests and logs.
func (why stop) String() string {
	names := [...]string{"going", "halted", "fast-failure", "simple-done", "no-cases", "no-runtime", "signal", "superseded"}
	if int(why) < len(names) {
		return names[why]
	}
	return "stop(" + strconv.Itoa(int(why)) + ")"
}
