package report

// The PNG writer: the same shapes as the SVG, rasterized anti-aliased with
// golang.org/x/image/vector (paths) and opentype with the Go fonts (text).
// Rectangles whose edges fall on pixel boundaries after scaling (bars on
// whole units, backgrounds, crisp .5 strokes, axis-parallel lines) skip the
// rasterizer and are filled directly with image/draw, which is much faster.

import (
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"io"
	"math"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

const (
	// pngGap is the space between two figures, in canvas units.
	pngGap = 16
	// maxPNGPixels is the largest image WritePNG makes: 200 megapixels
	// are 800 MB of RGBA in memory.
	maxPNGPixels = 200_000_000
	// dashOn and dashOff are a dashed line's pattern, in canvas units
	// (as the SVG's stroke-dasharray="6 4").
	dashOn, dashOff = 6, 4
	// maxTextPx is the largest font size drawn, in pixels: a bigger one
	// would only make huge glyph masks.
	maxTextPx = 4096
	// eps is how close to an integer a pixel coordinate must be to count
	// as one.
	eps = 1e-6
)

// WritePNG draws the canvases one under the other (a gap of 16 px between
// them, a white background), scaled by scale (1 = one pixel per unit; 2
// for print), as one PNG.
//
// Each canvas is clipped to its own W×H area. Shapes are drawn in order,
// anti-aliased and blended over what is below; a zero-alpha colour is not
// drawn; Class and Title are ignored. Lines and polylines have butt ends,
// polylines round joins. Text is set in the Go fonts.
func WritePNG(w io.Writer, canvases []*Canvas, scale float64) error {
	wi, hi, err := pngSize(canvases, scale)
	if err != nil {
		return err
	}
	img := image.NewRGBA(image.Rect(0, 0, wi, hi))
	for i := range img.Pix {
		img.Pix[i] = 0xff // opaque white
	}
	r := &pngRenderer{scale: scale}
	y0 := 0.0 // the canvas's top, in canvas units
	for _, c := range canvases {
		top := y0 * scale
		clip := image.Rect(0, int(math.Floor(top+eps)), int(pxCeil(c.W*scale)), int(pxCeil(top+c.H*scale))).Intersect(img.Bounds())
		r.dst = img.SubImage(clip).(*image.RGBA)
		r.ox, r.oy = 0, top
		if !clip.Empty() {
			for _, s := range c.Shapes {
				if err := r.shape(s); err != nil {
					return fmt.Errorf("report: figure %q: %w", c.ID, err)
				}
			}
		}
		y0 += c.H + pngGap
	}
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("report: writing PNG: %w", err)
	}
	return nil
}

// pngSize is the size in pixels of the image of the canvases, or why
// there is none.
func pngSize(canvases []*Canvas, scale float64) (w, h int, err error) {
	if !(scale > 0) || math.IsInf(scale, 0) {
		return 0, 0, fmt.Errorf("report: PNG scale %v: must be a positive number", scale)
	}
	if len(canvases) == 0 {
		return 0, 0, errors.New("report: no figures to write as PNG")
	}
	var wu, hu float64 // in canvas units
	for i, c := range canvases {
		if c == nil {
			return 0, 0, fmt.Errorf("report: figure %d is nil", i)
		}
		if !(c.W >= 0 && c.H >= 0) || math.IsInf(c.W, 0) || math.IsInf(c.H, 0) {
			return 0, 0, fmt.Errorf("report: figure %q has size %v×%v", c.ID, c.W, c.H)
		}
		wu = max(wu, c.W)
		if i > 0 {
			hu += pngGap
		}
		hu += c.H
	}
	wf, hf := pxCeil(wu*scale), pxCeil(hu*scale)
	if wf < 1 || hf < 1 {
		return 0, 0, fmt.Errorf("report: the figures make an empty PNG (%v×%v px)", wf, hf)
	}
	if wf*hf > maxPNGPixels {
		return 0, 0, fmt.Errorf("report: the PNG would be %s×%s px (%s megapixels, over the limit of %d); write the figures as SVG (--svg) instead, or use a smaller scale",
			count(wf), count(hf), count(wf/1e3*hf/1e3), maxPNGPixels/1_000_000)
	}
	return int(wf), int(hf), nil
}

// count is v, a whole number, in digits, or as 1.23e+45 if it is huge.
func count(v float64) string {
	if v < 1e12 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// pxCeil is math.Ceil forgiving float error: 110.00000000000001 is 110.
func pxCeil(v float64) float64 { return math.Ceil(v - eps) }

// pt is a point in pixels, in the image's coordinates.
type pt struct{ x, y float64 }

func (p pt) finite() bool {
	return !math.IsNaN(p.x) && !math.IsNaN(p.y) && !math.IsInf(p.x, 0) && !math.IsInf(p.y, 0)
}

// pngRenderer draws one canvas's shapes into dst, the canvas's area of the
// image. It keeps its rasterizer, mask and path buffers from shape to
// shape.
type pngRenderer struct {
	dst    *image.RGBA
	scale  float64
	ox, oy float64       // the canvas's origin, in pixels
	src    image.Uniform // of srcC
	srcC   Color
	z      vector.Rasterizer
	mask   image.Alpha
	// The path being built: polygons, the i-th ending before ends[i].
	pts  []pt
	ends []int
	// scratch for polylines and dashes
	line, piece []pt
}

// setSrc makes src c. src.C points at srcC: storing a Color in src.C
// itself would cost an allocation a shape.
func (r *pngRenderer) setSrc(c Color) {
	r.srcC = c
	if r.src.C == nil {
		r.src.C = &r.srcC
	}
}

// at is canvas point (x, y) in pixels.
func (r *pngRenderer) at(x, y float64) pt {
	return pt{r.ox + x*r.scale, r.oy + y*r.scale}
}

func (r *pngRenderer) shape(s Shape) error {
	switch s := s.(type) {
	case Rect:
		r.rect(&s)
	case *Rect:
		if s != nil {
			r.rect(s)
		}
	case Line:
		r.lineShape(&s)
	case *Line:
		if s != nil {
			r.lineShape(s)
		}
	case Polyline:
		r.polyline(&s)
	case *Polyline:
		if s != nil {
			r.polyline(s)
		}
	case Text:
		return r.text(&s)
	case *Text:
		if s != nil {
			return r.text(s)
		}
	default:
		return fmt.Errorf("cannot draw a shape of type %T", s)
	}
	return nil
}

func (r *pngRenderer) rect(s *Rect) {
	if !(s.W > 0 && s.H > 0) { // as SVG: nothing, not even the stroke
		return
	}
	p0, p1 := r.at(s.X, s.Y), r.at(s.X+s.W, s.Y+s.H)
	if s.Fill.A != 0 {
		r.fillRect(p0, p1, s.Fill)
	}
	if s.Stroke.A == 0 {
		return
	}
	sw := s.StrokeWidth
	if !(sw > 0) {
		sw = 1
	}
	h := sw * r.scale / 2
	o0, o1 := pt{p0.x - h, p0.y - h}, pt{p1.x + h, p1.y + h} // outer edge
	i0, i1 := pt{p0.x + h, p0.y + h}, pt{p1.x - h, p1.y - h} // inner edge
	switch {
	case i0.x >= i1.x || i0.y >= i1.y: // no hole
		r.fillRect(o0, o1, s.Stroke)
	case aligned(o0) && aligned(o1) && aligned(i0) && aligned(i1):
		// Four bands that do not overlap, so that a translucent stroke is
		// blended once everywhere.
		r.fillRect(o0, pt{o1.x, i0.y}, s.Stroke)             // top
		r.fillRect(pt{o0.x, i1.y}, o1, s.Stroke)             // bottom
		r.fillRect(pt{o0.x, i0.y}, pt{i0.x, i1.y}, s.Stroke) // left
		r.fillRect(pt{i1.x, i0.y}, pt{o1.x, i1.y}, s.Stroke) // right
	default:
		// The outer edge one way round, the inner the other: a hole.
		r.begin()
		r.poly(o0, pt{o1.x, o0.y}, o1, pt{o0.x, o1.y})
		r.poly(i0, pt{i0.x, i1.y}, i1, pt{i1.x, i0.y})
		r.fill(s.Stroke)
	}
}

func aligned(p pt) bool {
	return math.Abs(p.x-math.Round(p.x)) < eps && math.Abs(p.y-math.Round(p.y)) < eps
}

// fillRect fills the rectangle from p0 to p1 (p0 top left), directly if
// its edges are on pixel boundaries, else anti-aliased.
func (r *pngRenderer) fillRect(p0, p1 pt, c Color) {
	if !p0.finite() || !p1.finite() || !(p0.x < p1.x && p0.y < p1.y) {
		return
	}
	if !aligned(p0) || !aligned(p1) {
		r.begin()
		r.poly(p0, pt{p1.x, p0.y}, p1, pt{p0.x, p1.y})
		r.fill(c)
		return
	}
	b := r.dst.Bounds()
	x0, y0 := clampInt(p0.x, b.Min.X, b.Max.X), clampInt(p0.y, b.Min.Y, b.Max.Y)
	x1, y1 := clampInt(p1.x, b.Min.X, b.Max.X), clampInt(p1.y, b.Min.Y, b.Max.Y)
	if x0 >= x1 || y0 >= y1 {
		return
	}
	r.setSrc(c)
	draw.Draw(r.dst, image.Rect(x0, y0, x1, y1), &r.src, image.Point{}, draw.Over)
}

// clampInt is v, rounded, within [lo, hi].
func clampInt(v float64, lo, hi int) int {
	switch {
	case v <= float64(lo):
		return lo
	case v >= float64(hi):
		return hi
	}
	return int(math.Round(v))
}

// begin starts a new path.
func (r *pngRenderer) begin() {
	r.pts, r.ends = r.pts[:0], r.ends[:0]
}

// poly adds a closed polygon to the path. All polygons of a path that
// should add up (not cut holes in each other) must go the same way round.
func (r *pngRenderer) poly(p ...pt) {
	r.pts = append(r.pts, p...)
	r.ends = append(r.ends, len(r.pts))
}

// fill fills the path, anti-aliased, with c over dst. Overlapping polygons
// of the path are blended once (coverage is clamped at 1).
func (r *pngRenderer) fill(c Color) {
	if len(r.pts) == 0 {
		return
	}
	minX, minY := math.Inf(1), math.Inf(1)
	maxX, maxY := math.Inf(-1), math.Inf(-1)
	for _, p := range r.pts {
		if !p.finite() {
			return
		}
		minX, maxX = min(minX, p.x), max(maxX, p.x)
		minY, maxY = min(minY, p.y), max(maxY, p.y)
	}
	b := r.dst.Bounds()
	x0, y0 := max(b.Min.X, floorInt(minX, b.Min.X)), max(b.Min.Y, floorInt(minY, b.Min.Y))
	x1, y1 := min(b.Max.X, ceilInt(maxX, b.Max.X)), min(b.Max.Y, ceilInt(maxY, b.Max.Y))
	if x0 >= x1 || y0 >= y1 {
		return
	}
	w, h := x1-x0, y1-y0

	// Rasterize the path into the mask (w×h, at (x0, y0) of dst) ...
	r.z.Reset(w, h)
	r.z.DrawOp = draw.Src // every mask pixel is written: no need to clear it
	start := 0
	for _, end := range r.ends {
		if end-start >= 3 {
			p := r.pts[start]
			r.z.MoveTo(float32(p.x-float64(x0)), float32(p.y-float64(y0)))
			for _, p := range r.pts[start+1 : end] {
				r.z.LineTo(float32(p.x-float64(x0)), float32(p.y-float64(y0)))
			}
			r.z.ClosePath()
		}
		start = end
	}
	if n := w * h; cap(r.mask.Pix) < n {
		r.mask.Pix = make([]uint8, n)
	} else {
		r.mask.Pix = r.mask.Pix[:n]
	}
	r.mask.Stride, r.mask.Rect = w, image.Rect(0, 0, w, h)
	r.z.Draw(&r.mask, r.mask.Rect, image.Opaque, image.Point{})

	// ... then blend c through it.
	r.setSrc(c)
	draw.DrawMask(r.dst, image.Rect(x0, y0, x1, y1), &r.src, image.Point{}, &r.mask, image.Point{}, draw.Over)
}

// floorInt and ceilInt are math.Floor and math.Ceil of v as an int, or
// def if v is too large to convert (the caller clamps to the image).
func floorInt(v float64, def int) int {
	if math.Abs(v) > 1<<30 {
		return def
	}
	return int(math.Floor(v))
}

func ceilInt(v float64, def int) int {
	if math.Abs(v) > 1<<30 {
		return def
	}
	return int(math.Ceil(v))
}

// strokeWidth is a line's width in pixels (1 unit if not set).
func (r *pngRenderer) strokeWidth(w float64) float64 {
	if !(w > 0) || math.IsInf(w, 0) {
		w = 1
	}
	return w * r.scale
}

func (r *pngRenderer) lineShape(s *Line) {
	if s.Stroke.A == 0 {
		return
	}
	p, q := r.at(s.X1, s.Y1), r.at(s.X2, s.Y2)
	if !p.finite() || !q.finite() || p == q {
		return // butt ends: a line of no length draws nothing
	}
	hw := r.strokeWidth(s.Width) / 2
	r.line = append(r.line[:0], p, q)
	if p.x == q.x || p.y == q.y {
		// Horizontal or vertical: rectangles, pixel-aligned ones drawn
		// directly (grid lines, axes, ticks).
		r.pieces(r.line, s.Dash, func(piece []pt) {
			a, b := piece[0], piece[1]
			x0, x1 := min(a.x, b.x), max(a.x, b.x)
			y0, y1 := min(a.y, b.y), max(a.y, b.y)
			if a.y == b.y {
				y0, y1 = y0-hw, y1+hw
			} else {
				x0, x1 = x0-hw, x1+hw
			}
			r.fillRect(pt{x0, y0}, pt{x1, y1}, s.Stroke)
		})
		return
	}
	r.begin()
	r.pieces(r.line, s.Dash, func(piece []pt) { r.segment(piece[0], piece[1], hw) })
	r.fill(s.Stroke)
}

func (r *pngRenderer) polyline(s *Polyline) {
	if s.Stroke.A == 0 || len(s.Points) < 2 {
		return
	}
	r.line = r.line[:0]
	for _, cp := range s.Points {
		p := r.at(cp.X, cp.Y)
		if !p.finite() {
			return
		}
		if n := len(r.line); n > 0 && r.line[n-1] == p {
			continue // a segment of no length has no direction to stroke
		}
		r.line = append(r.line, p)
	}
	if len(r.line) < 2 {
		return
	}
	hw := r.strokeWidth(s.Width) / 2
	r.begin()
	r.pieces(r.line, s.Dash, func(piece []pt) {
		for i := 1; i < len(piece); i++ {
			r.segment(piece[i-1], piece[i], hw)
			if i > 1 {
				r.disc(piece[i-1], hw) // the join: no gap at the vertex
			}
		}
	})
	r.fill(s.Stroke)
}

// segment adds the quad that strokes a to b with half-width hw.
func (r *pngRenderer) segment(a, b pt, hw float64) {
	dx, dy := b.x-a.x, b.y-a.y
	l := math.Hypot(dx, dy)
	if l == 0 {
		return
	}
	// n is the normal; with this sign, the quad goes the same way round
	// as disc's polygons (see poly).
	nx, ny := -dy/l*hw, dx/l*hw
	r.poly(pt{a.x + nx, a.y + ny}, pt{b.x + nx, b.y + ny}, pt{b.x - nx, b.y - ny}, pt{a.x - nx, a.y - ny})
}

// disc adds a polygon that covers the disc of radius rad at c (its edges
// touch the circle), going round as segment's quads do.
func (r *pngRenderer) disc(c pt, rad float64) {
	n := min(64, max(8, int(math.Ceil(rad*4))))
	rr := rad / math.Cos(math.Pi/float64(n))
	start := len(r.pts)
	for i := range n {
		a := -2 * math.Pi * float64(i) / float64(n)
		r.pts = append(r.pts, pt{c.x + rr*math.Cos(a), c.y + rr*math.Sin(a)})
	}
	if len(r.pts) > start {
		r.ends = append(r.ends, len(r.pts))
	}
}

// pieces calls f with the parts of the path pts that are drawn: all of it,
// or if dash, its dashes (6 units on, 4 off, running on across vertices).
// f must not keep its argument.
func (r *pngRenderer) pieces(pts []pt, dash bool, f func([]pt)) {
	if !dash {
		f(pts)
		return
	}
	on, off := dashOn*r.scale, dashOff*r.scale
	total := 0.0
	for i := 1; i < len(pts); i++ {
		total += math.Hypot(pts[i].x-pts[i-1].x, pts[i].y-pts[i-1].y)
	}
	if total/(on+off) > 1e6 { // absurdly long: solid rather than stall
		f(pts)
		return
	}
	drawing, left := true, on // in a dash or a gap; how much of it is left
	piece := append(r.piece[:0], pts[0])
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		l := math.Hypot(b.x-a.x, b.y-a.y)
		t := 0.0 // how far along a→b
		for l-t > left {
			t += left
			p := pt{a.x + (b.x-a.x)*t/l, a.y + (b.y-a.y)*t/l}
			if drawing {
				if p != piece[len(piece)-1] {
					piece = append(piece, p)
				}
				if len(piece) >= 2 {
					f(piece)
				}
				left = off
			} else {
				piece = append(piece[:0], p)
				left = on
			}
			drawing = !drawing
		}
		left -= l - t
		if drawing && b != piece[len(piece)-1] {
			piece = append(piece, b)
		}
	}
	if drawing && len(piece) >= 2 {
		f(piece)
	}
	r.piece = piece
}

func (r *pngRenderer) text(s *Text) error {
	if s.Fill.A == 0 || s.S == "" {
		return nil
	}
	size := s.Size * r.scale
	p := r.at(s.X, s.Y)
	if !(size > 0) || size > maxTextPx || !p.finite() || math.Abs(p.x) > 1<<24 || math.Abs(p.y) > 1<<24 {
		return nil
	}
	f, err := goFace(size, s.Bold)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	x := fixed.Int26_6(math.Round(p.x * 64))
	switch s.Anchor {
	case Middle:
		x -= font.MeasureString(f.face, s.S) / 2
	case End:
		x -= font.MeasureString(f.face, s.S)
	}
	r.setSrc(s.Fill)
	d := font.Drawer{Dst: r.dst, Src: &r.src, Face: f.face, Dot: fixed.Point26_6{X: x, Y: fixed.Int26_6(math.Round(p.y * 64))}}
	d.DrawString(s.S)
	return nil
}

// The Go fonts, parsed once, and their faces by size and weight.
var (
	goFontsOnce       sync.Once
	goRegular, goBold *opentype.Font
	goFontsErr        error
	facesMu           sync.Mutex
	faces             = map[faceKey]*lockedFace{}
)

type faceKey struct {
	size float64 // in pixels
	bold bool
}

// lockedFace is a face and the lock its users hold: an opentype face is
// not safe for concurrent use.
type lockedFace struct {
	mu   sync.Mutex
	face font.Face
}

// maxFaces bounds the cache of faces; figures use a handful of sizes.
const maxFaces = 64

func goFace(size float64, bold bool) (*lockedFace, error) {
	goFontsOnce.Do(func() {
		goRegular, goFontsErr = opentype.Parse(goregular.TTF)
		if goFontsErr == nil {
			goBold, goFontsErr = opentype.Parse(gobold.TTF)
		}
		if goFontsErr != nil {
			goFontsErr = fmt.Errorf("parsing the Go fonts: %w", goFontsErr)
		}
	})
	if goFontsErr != nil {
		return nil, goFontsErr
	}
	k := faceKey{size, bold}
	facesMu.Lock()
	defer facesMu.Unlock()
	if f, ok := faces[k]; ok {
		return f, nil
	}
	ft := goRegular
	if bold {
		ft = goBold
	}
	// At 72 dpi a point is a pixel; no hinting, so that advances (and so
	// anchors) are those of the SVG's text at any scale.
	face, err := opentype.NewFace(ft, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingNone})
	if err != nil {
		return nil, fmt.Errorf("a %v px face of the Go font: %w", size, err)
	}
	if len(faces) >= maxFaces {
		clear(faces) // faces in use stay valid; they are just not shared
	}
	f := &lockedFace{face: face}
	faces[k] = f
	return f, nil
}
