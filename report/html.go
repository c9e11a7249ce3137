package report

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// MaxHostRows is how many hosts the page's table lists (the worst first).
const MaxHostRows = 1000

// page is the style of the page: no fonts, scripts or images from
// anywhere; the Content-Security-Policy forbids every request, so that the
// page shows the same on a laptop offline as on a cluster's login node.
const pageHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%s</title>
<style>
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222; margin: 24px auto; max-width: 1000px; padding: 0 12px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin: 28px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
p { font-size: 14px; line-height: 1.4; margin: 4px 0 8px; }
.meta { color: #666; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 3px 10px 3px 0; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; }
td.cmd { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; max-width: 420px; overflow-wrap: anywhere; }
svg.figure .figure-title { display: none; }
svg.figure { display: block; max-width: 100%%; height: auto; margin: 6px 0; }
.succeeded { color: #4477aa; } .failed { color: #cc3311; } .interrupted { color: #cc7711; } .running { color: #777; }
</style>
</head>
<body>
`

// WriteHTML writes the report as one HTML page for the farm called name:
// the figures as inline SVG, the tables as HTML.
func WriteHTML(w io.Writer, d *Data, name string) error {
	b := bufio.NewWriterSize(w, 256<<10)
	esc := xmlText
	fmt.Fprintf(b, pageHead, esc("farm report: "+name))
	fmt.Fprintf(b, "<h1>farm report: %s</h1>\n<p class=\"meta\">Generated %s by farm report. The page needs nothing but itself: no network, no scripts.</p>\n", esc(name), esc(fmtTime(d.Generated)))

	b.WriteString("<section id=\"summary-section\">\n<h2>Summary</h2>\n<table id=\"summary\">\n")
	for _, s := range d.Summary {
		fmt.Fprintf(b, "<tr><th>%s</th><td class=\"n\">%s</td></tr>\n", esc(s.Name), esc(s.Value))
	}
	b.WriteString("</table>\n</section>\n")

	writeHistogramSection(b, d.Histogram)

	t := d.Timeline
	b.WriteString("<section id=\"timeline-section\">\n<h2>Timeline</h2>\n")
	fmt.Fprintf(b, "<p>A row per meta-job (per loop, for meta-jobs that run several cases at once); the black ticks are the job's start and end as the batch system says, a purple square the meta-job's own exit (hover it for why). %s</p>\n", esc(t.Note))
	writeInline(b, TimelineFigure(t))
	b.WriteString("</section>\n")

	tp := d.Throughput
	b.WriteString("<section id=\"throughput-section\">\n<h2>Throughput</h2>\n")
	fmt.Fprintf(b, "<p>Cases that ended, per minute, counted in bins of %s. %s</p>\n", esc(fmtSeconds(float64(tp.BinSeconds))), esc(ETAText(tp)))
	writeInline(b, ThroughputFigure(tp))
	b.WriteString("</section>\n")

	writeFailuresSection(b, d)
	writeUseSection(b, d.Use)
	writeSlowestSection(b, d.Slowest)
	b.WriteString("</body>\n</html>\n")
	return b.Flush()
}

// writeHistogramSection writes the section of the histogram h.
func writeHistogramSection(b *bufio.Writer, h Histogram) {
	b.WriteString("<section id=\"histogram-section\">\n<h2>Case durations</h2>\n")
	fmt.Fprintf(b, "<p>How long the cases that ended ran, stacked by how they ended%s. ", map[bool]string{true: ", on a logarithmic axis (they span two decades or more)", false: ""}[h.Log])
	fmt.Fprintf(b, "The dashed lines are the upper 12.5%% quantile of the durations of the cases that ended (%s), which is how a meta-job computes dt_cutoff, and dt_cutoff as the meta-jobs last stored it (%s): a meta-job with less time left than dt_cutoff starts no more cases.",
		quantText(h.Quantile), quantText(h.Cutoff))
	if h.Log && h.Zero > 0 {
		fmt.Fprintf(b, " %d cases that ended after 0 s are counted in the first bin.", h.Zero)
	}
	if h.Untimed > 0 {
		fmt.Fprintf(b, " %d cases that META recorded before the farm was adopted have no times: they are not in the figures but in the statuses below.", h.Untimed)
	}
	if h.Estimated > 0 {
		fmt.Fprintf(b, " %d interrupted cases have no record of their end: they are counted to their job's end.", h.Estimated)
	}
	b.WriteString("</p>\n")
	writeInline(b, HistogramFigure(h))
	b.WriteString("</section>\n")
}

// writeFailuresSection writes the section of d's failures, by host and by
// status.
func writeFailuresSection(b *bufio.Writer, d *Data) {
	esc := xmlText
	b.WriteString("<section id=\"failures-section\">\n<h2>Failures</h2>\n<p>By host, the hosts with the largest share of cases that failed or were interrupted first: a bad node stands out at the top.</p>\n")
	writeInline(b, HostsFigure(d.Hosts))
	timedOut := slices.ContainsFunc(d.Hosts, func(h HostCount) bool { return h.TimedOut > 0 })
	b.WriteString("<table id=\"hosts\">\n<tr><th>host</th><th class=\"n\">ended</th><th class=\"n\">failed</th><th class=\"n\">interrupted</th>")
	if timedOut {
		b.WriteString("<th class=\"n\">timed out</th>")
	}
	b.WriteString("<th class=\"n\">share</th></tr>\n")
	for i, hc := range d.Hosts {
		if i == MaxHostRows {
			fmt.Fprintf(b, "<tr><td colspan=\"%d\">… and %d more hosts</td></tr>\n", 5+map[bool]int{true: 1}[timedOut], len(d.Hosts)-MaxHostRows)
			break
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td>", esc(hc.Host), hc.Ended, hc.Failed, hc.Interrupted)
		if timedOut {
			fmt.Fprintf(b, "<td class=\"n\">%d</td>", hc.TimedOut)
		}
		fmt.Fprintf(b, "<td class=\"n\">%.1f%%</td></tr>\n", 100*float64(hc.notOK())/float64(max(hc.Ended, 1)))
	}
	b.WriteString("</table>\n<p>By exit status (failed cases) and by signal (interrupted ones: 9 or 15 is usually the job's time limit or a kill).</p>\n")
	writeInline(b, StatusesFigure(d.Statuses))
	b.WriteString("<table id=\"statuses\">\n<tr><th>ended by</th><th class=\"n\">cases</th></tr>\n")
	for _, s := range d.Statuses {
		what := s.Kind
		if s.Kind != "no end record" {
			what += " " + strconv.Itoa(s.Code)
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td class=\"n\">%d</td></tr>\n", esc(what), s.Cases)
	}
	b.WriteString("</table>\n</section>\n")
}

// writeSlowestSection writes the section of the slowest cases.
func writeSlowestSection(b *bufio.Writer, slowest []Attempt) {
	esc := xmlText
	b.WriteString("<section id=\"slowest-section\">\n")
	fmt.Fprintf(b, "<h2>The slowest %d cases</h2>\n<table id=\"slowest\">\n<tr><th class=\"n\">case</th><th class=\"n\">duration</th><th>ended</th><th>job</th><th>host</th><th>started</th><th>command</th></tr>\n", SlowestCount)
	for _, a := range slowest {
		how := endedHow(a)
		fmt.Fprintf(b, "<tr><td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"%s\">%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"cmd\">%s</td></tr>\n",
			a.ID, esc(fmtSeconds(a.Seconds)), a.State, esc(how), esc(a.Job), esc(a.Host), esc(fmtTime(a.Start)), esc(a.Command))
	}
	b.WriteString("</table>\n</section>\n")
}

// endedHow says how attempt a ended: "failed (status 3)".
func endedHow(a Attempt) string {
	switch a.State {
	case Failed:
		return fmt.Sprintf("failed (status %d)", a.Status)
	case Interrupted:
		if a.Status > 0 {
			return fmt.Sprintf("interrupted (signal %d)", a.Status)
		}
	case TimedOut:
		return fmt.Sprintf("timed out (signal %d)", a.Status)
	}
	return a.State
}

func quantText(v float64) string {
	if v <= 0 {
		return "not computed yet"
	}
	return fmtSeconds(v)
}
