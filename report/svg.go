package report

import (
	"bufio"
	"html"
	"io"
	"strconv"
	"strings"
)

// svgWriter writes shapes as SVG elements, numbers with at most one
// decimal (a tenth of a pixel), so that a timeline of 20,000 bars stays
// small.
type svgWriter struct {
	w   *bufio.Writer
	num []byte
}

func (s *svgWriter) str(v string) { s.w.WriteString(v) }

func (s *svgWriter) attr(name string, v float64) {
	s.w.WriteByte(' ')
	s.w.WriteString(name)
	s.w.WriteString(`="`)
	s.num = strconv.AppendFloat(s.num[:0], float64(int64(v*10+copysign(0.5, v)))/10, 'f', -1, 64)
	s.w.Write(s.num)
	s.w.WriteByte('"')
}

// xmlText is v fit for XML and HTML text: invalid UTF-8 and the characters
// XML does not allow (controls but tab and newlines, U+FFFE, U+FFFF) become
// U+FFFD, then &, <, >, ' and " are escaped.
func xmlText(v string) string {
	v = strings.ToValidUTF8(v, "\uFFFD")
	v = strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0xFFFE || r == 0xFFFF {
			return '\uFFFD'
		}
		return r
	}, v)
	return html.EscapeString(v)
}

func copysign(x, sign float64) float64 {
	if sign < 0 {
		return -x
	}
	return x
}

func (s *svgWriter) sattr(name, v string) {
	if v == "" {
		return
	}
	s.w.WriteByte(' ')
	s.w.WriteString(name)
	s.w.WriteString(`="`)
	s.w.WriteString(xmlText(v))
	s.w.WriteByte('"')
}

// paint writes a fill or stroke attribute (and its opacity if not opaque);
// "none" for None.
func (s *svgWriter) paint(name string, c Color) {
	if c.A == 0 {
		s.sattr(name, "none")
		return
	}
	s.sattr(name, Hex(c))
	if c.A != 0xff {
		s.w.WriteString(" " + name + `-opacity="`)
		s.w.WriteString(strconv.FormatFloat(float64(c.A)/255, 'f', 2, 64))
		s.w.WriteByte('"')
	}
}

// end closes an element, with its title as a tooltip.
func (s *svgWriter) end(tag, title string) {
	if title == "" {
		s.str("/>")
		return
	}
	s.str("><title>")
	s.str(xmlText(title))
	s.str("</title></" + tag + ">")
}

// canvas writes c's shapes.
func (s *svgWriter) canvas(c *Canvas) {
	for _, sh := range c.Shapes {
		switch v := sh.(type) {
		case Rect:
			s.str("<rect")
			s.attr("x", v.X)
			s.attr("y", v.Y)
			s.attr("width", v.W)
			s.attr("height", v.H)
			s.paint("fill", v.Fill)
			if v.Stroke.A != 0 {
				s.paint("stroke", v.Stroke)
				s.attr("stroke-width", max(v.StrokeWidth, 1))
			}
			s.sattr("class", v.Class)
			s.end("rect", v.Title)
		case Line:
			s.str("<line")
			s.attr("x1", v.X1)
			s.attr("y1", v.Y1)
			s.attr("x2", v.X2)
			s.attr("y2", v.Y2)
			s.paint("stroke", v.Stroke)
			s.attr("stroke-width", max(v.Width, 1))
			if v.Dash {
				s.sattr("stroke-dasharray", "6 4")
			}
			s.sattr("class", v.Class)
			s.end("line", v.Title)
		case Polyline:
			s.str(`<polyline fill="none"`)
			s.paint("stroke", v.Stroke)
			s.attr("stroke-width", max(v.Width, 1))
			if v.Dash {
				s.sattr("stroke-dasharray", "6 4")
			}
			s.sattr("class", v.Class)
			s.str(` points="`)
			for i, p := range v.Points {
				if i > 0 {
					s.w.WriteByte(' ')
				}
				s.num = strconv.AppendFloat(s.num[:0], float64(int64(p.X*10))/10, 'f', -1, 64)
				s.num = append(s.num, ',')
				s.num = strconv.AppendFloat(s.num, float64(int64(p.Y*10))/10, 'f', -1, 64)
				s.w.Write(s.num)
			}
			s.str(`"/>`)
		case Text:
			s.str("<text")
			s.attr("x", v.X)
			s.attr("y", v.Y)
			s.attr("font-size", v.Size)
			switch v.Anchor {
			case Middle:
				s.sattr("text-anchor", "middle")
			case End:
				s.sattr("text-anchor", "end")
			}
			if v.Bold {
				s.sattr("font-weight", "bold")
			}
			s.paint("fill", v.Fill)
			s.sattr("class", v.Class)
			s.str(">")
			s.str(xmlText(v.S))
			s.str("</text>")
		}
	}
}

// open writes the <svg> element of a w×h drawing.
func (s *svgWriter) open(id, title string, w, h float64, xmlns bool) {
	s.str("<svg")
	if xmlns {
		s.str(` xmlns="http://www.w3.org/2000/svg"`)
	}
	s.sattr("id", id)
	s.str(` class="figure" role="img"`)
	s.sattr("aria-label", title)
	s.attr("width", w)
	s.attr("height", h)
	s.str(` viewBox="0 0 ` + strconv.Itoa(int(w)) + " " + strconv.Itoa(int(h)) + `"`)
	s.str(` font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`)
}

// WriteSVG writes the canvases one under the other as one SVG document,
// on white, 16 units apart.
func WriteSVG(w io.Writer, canvases []*Canvas) error {
	s := &svgWriter{w: bufio.NewWriterSize(w, 64<<10)}
	width, height := 0.0, 0.0
	for i, c := range canvases {
		width = max(width, c.W)
		if i > 0 {
			height += 16
		}
		height += c.H
	}
	s.str(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	s.open("farm-report", "farm report", width, height, true)
	s.str(`<rect width="100%" height="100%" fill="#ffffff"/>`)
	y := 0.0
	for _, c := range canvases {
		s.str(`<g id="` + xmlText(c.ID) + `" transform="translate(0 ` + strconv.FormatFloat(y, 'f', -1, 64) + `)">`)
		s.canvas(c)
		s.str("</g>\n")
		y += c.H + 16
	}
	s.str("</svg>\n")
	return s.w.Flush()
}

// writeInline writes c as an <svg> element of an HTML page.
func writeInline(w *bufio.Writer, c *Canvas) {
	s := &svgWriter{w: w}
	s.open(c.ID, c.Title, c.W, c.H, false)
	s.canvas(c)
	s.str("</svg>\n")
}
