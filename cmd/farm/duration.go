package main

import (
	"errors"
	"flag"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// durationHint is what a duration flag says of a value that is not a
// duration ("5", "2 hours").
const durationHint = "give a duration with a unit, such as 90s, 10m or 2h"

// durationFlag is a cli.DurationFlag whose bad values are refused in
// words that name the units (durationHint), not as "parse error". Every
// duration flag of farm is one.
type durationFlag struct{ *cli.DurationFlag }

// Apply implements cli.Flag: the library's duration, read through
// durationValue.
func (f durationFlag) Apply(set *flag.FlagSet) error {
	if err := f.DurationFlag.Apply(set); err != nil {
		return err
	}
	for _, name := range f.Names() {
		if fl := set.Lookup(name); fl != nil {
			fl.Value = durationValue{fl.Value}
		}
	}
	return nil
}

// durationValue is a duration flag's flag.Value that refuses a value
// time.ParseDuration does not read with durationHint.
type durationValue struct{ flag.Value }

func (v durationValue) Set(s string) error {
	if _, err := time.ParseDuration(s); err != nil {
		return errors.New(durationHint)
	}
	return v.Value.Set(s)
}

// badFlagValue is the flag package's message for a value Set refused.
var badFlagValue = regexp.MustCompile(`^invalid value "(.*)" for flag -(\S+): `)

// flagErrorMessage words a flag error of the library for farm's users:
// "--timeout 5: give a duration with a unit, ..." for a duration flag
// given a bad value.
func flagErrorMessage(msg string) string {
	if m := badFlagValue.FindStringSubmatch(msg); m != nil && strings.HasSuffix(msg, durationHint) {
		return "--" + m[2] + " " + m[1] + ": " + durationHint
	}
	return msg
}
