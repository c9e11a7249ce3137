package report

import (
	"fmt"
	"image/color"
)

// A figure is drawn once, as a Canvas of shapes, and written from it as
// SVG (in the HTML page, or alone with --svg) and as PNG (--png): the two
// show the same thing because they are the same shapes.

// Canvas is one figure: shapes in drawing order on a W×H area, in pixels,
// with y growing downwards (as in SVG).
type Canvas struct {
	ID     string // the figure's id in the page ("histogram", "timeline", ...)
	Title  string
	W, H   float64
	Shapes []Shape
}

// Shape is one of Rect, Line, Polyline, Text.
type Shape interface{ isShape() }

// Color is a colour with alpha; the zero Color is none (no fill, no stroke).
type Color = color.NRGBA

// None is no colour.
var None = Color{}

// Rect is an axis-aligned rectangle. Class and Title are for the page: a
// class the tests and styles select by, and a tooltip (SVG <title>).
type Rect struct {
	X, Y, W, H  float64
	Fill        Color
	Stroke      Color
	StrokeWidth float64
	Class       string
	Title       string
}

// Line is a straight line of Width pixels, dashed if Dash.
type Line struct {
	X1, Y1, X2, Y2 float64
	Stroke         Color
	Width          float64
	Dash           bool
	Class          string
	Title          string
}

// Point is a point of a Polyline.
type Point struct{ X, Y float64 }

// Polyline is an open path through Points.
type Polyline struct {
	Points []Point
	Stroke Color
	Width  float64
	Dash   bool
	Class  string
}

// Anchor is where a Text's X is: at its start, middle or end.
type Anchor uint8

const (
	Start Anchor = iota
	Middle
	End
)

// Text is one line of text with its baseline at Y. Size is the font size
// in pixels.
type Text struct {
	X, Y   float64
	S      string
	Size   float64
	Anchor Anchor
	Fill   Color
	Bold   bool
	Class  string
}

func (Rect) isShape()     {}
func (Line) isShape()     {}
func (Polyline) isShape() {}
func (Text) isShape()     {}

// Add appends shapes.
func (c *Canvas) Add(s ...Shape) { c.Shapes = append(c.Shapes, s...) }

// Hex is c as "#rrggbb", for SVG and CSS.
func Hex(c Color) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }
