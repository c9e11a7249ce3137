package report

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

var (
	red   = Color{R: 255, A: 255}
	blue  = Color{B: 255, A: 255}
	black = Color{A: 255}
	white = color.NRGBA{255, 255, 255, 255}
)

// render writes the canvases as PNG and decodes it again.
func render(t testing.TB, scale float64, cs ...*Canvas) image.Image {
	t.Helper()
	img, err := renderErr(scale, cs...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func renderErr(scale float64, cs ...*Canvas) (image.Image, error) {
	var b bytes.Buffer
	if err := WritePNG(&b, cs, scale); err != nil {
		return nil, err
	}
	return png.Decode(&b)
}

// canvas is a w×h canvas with shapes.
func canvas(w, h float64, s ...Shape) *Canvas {
	c := &Canvas{ID: "test", W: w, H: h}
	c.Add(s...)
	return c
}

func px(img image.Image, x, y int) color.NRGBA {
	return color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
}

func near(a, b uint8, tol int) bool {
	d := int(a) - int(b)
	return -tol <= d && d <= tol
}

func nearColor(a, b color.NRGBA, tol int) bool {
	return near(a.R, b.R, tol) && near(a.G, b.G, tol) && near(a.B, b.B, tol) && near(a.A, b.A, tol)
}

func wantPx(t *testing.T, img image.Image, x, y int, want color.NRGBA, tol int) {
	t.Helper()
	if got := px(img, x, y); !nearColor(got, want, tol) {
		t.Errorf("pixel (%d, %d) is %v, want %v (±%d)", x, y, got, want, tol)
	}
}

func isWhite(c color.NRGBA) bool { return c == white }

func TestPNGSize(t *testing.T) {
	for _, tc := range []struct {
		scale float64
		w, h  int
	}{{1, 300, 166}, {2, 600, 332}, {1.5, 450, 249}} {
		img := render(t, tc.scale, canvas(300, 100), canvas(200, 50))
		if b := img.Bounds(); b.Dx() != tc.w || b.Dy() != tc.h {
			t.Errorf("scale %v: %v×%v, want %v×%v", tc.scale, b.Dx(), b.Dy(), tc.w, tc.h)
		}
	}
}

// The second canvas starts below the first and the gap; each is clipped
// to its own area; the background is white.
func TestPNGLayout(t *testing.T) {
	for _, scale := range []float64{1, 2} {
		s := int(scale)
		img := render(t, scale,
			canvas(300, 100, Rect{X: 0, Y: 0, W: 300, H: 200, Fill: red}), // overflows its canvas
			canvas(200, 50, Rect{X: 0, Y: 0, W: 10, H: 10, Fill: blue}))
		wantPx(t, img, 5*s, 99*s, red, 0)
		wantPx(t, img, 5*s, 100*s, white, 0) // the gap: clipped
		wantPx(t, img, 5*s, 115*s, white, 0)
		wantPx(t, img, 5*s, 116*s, blue, 0)
		wantPx(t, img, 5*s, 125*s, blue, 0)
		wantPx(t, img, 5*s, 126*s, white, 0)
		wantPx(t, img, 250*s, 140*s, white, 0) // right of the narrower canvas
	}
}

func TestPNGRect(t *testing.T) {
	img := render(t, 1, canvas(200, 200,
		Rect{X: 10, Y: 10, W: 50, H: 30, Fill: red},
		Rect{X: 100.3, Y: 10.6, W: 50.2, H: 30.1, Fill: red}, // not pixel-aligned
		Rect{X: 10, Y: 100, W: 60, H: 40, Stroke: blue, StrokeWidth: 2},
		Rect{X: 100.5, Y: 100.5, W: 60, H: 40, Stroke: blue}, // width 1 by default
		Rect{X: 10.3, Y: 160.3, W: 60, H: 30, Stroke: blue, StrokeWidth: 3},
		Rect{X: 180, Y: 180, W: 0, H: 10, Fill: red, Stroke: red}, // empty: nothing
	))
	// aligned fill
	wantPx(t, img, 30, 20, red, 0)
	wantPx(t, img, 10, 10, red, 0)
	wantPx(t, img, 59, 39, red, 0)
	wantPx(t, img, 60, 20, white, 0)
	wantPx(t, img, 30, 40, white, 0)
	wantPx(t, img, 90, 90, white, 0)
	// anti-aliased fill: full inside, partial at the edges, nothing outside
	wantPx(t, img, 125, 25, red, 0)
	wantPx(t, img, 101, 11, red, 0)
	wantPx(t, img, 100, 25, color.NRGBA{255, 77, 77, 255}, 5)   // 70% covered
	wantPx(t, img, 125, 10, color.NRGBA{255, 153, 153, 255}, 5) // 40% covered
	wantPx(t, img, 99, 25, white, 0)
	wantPx(t, img, 151, 25, white, 0)
	// stroke, no fill: edges blue (the stroke is centred on the edge), centre white
	wantPx(t, img, 40, 120, white, 0)
	for _, p := range []image.Point{{9, 120}, {10, 120}, {69, 120}, {70, 120}, {40, 99}, {40, 100}, {40, 139}, {40, 140}} {
		wantPx(t, img, p.X, p.Y, blue, 0)
	}
	wantPx(t, img, 8, 120, white, 0)
	wantPx(t, img, 11, 120, white, 0)
	wantPx(t, img, 71, 120, white, 0)
	// a crisp 1-unit stroke at .5
	wantPx(t, img, 100, 120, blue, 0)
	wantPx(t, img, 160, 120, blue, 0)
	wantPx(t, img, 130, 100, blue, 0)
	wantPx(t, img, 130, 140, blue, 0)
	wantPx(t, img, 130, 120, white, 0)
	wantPx(t, img, 101, 120, white, 0)
	// an unaligned stroke (rasterized with a hole)
	wantPx(t, img, 10, 175, blue, 0) // 8.8..11.8 covers pixel 10
	wantPx(t, img, 40, 175, white, 0)
	wantPx(t, img, 70, 175, blue, 0)
	wantPx(t, img, 185, 185, white, 0)
}

func TestPNGHalfAlpha(t *testing.T) {
	half := Color{A: 128}
	grey := color.NRGBA{127, 127, 127, 255}
	img := render(t, 1, canvas(100, 100,
		Rect{X: 10, Y: 10, W: 30, H: 30, Fill: half},
		Rect{X: 50.5, Y: 10.5, W: 30, H: 30, Fill: half},
		Rect{X: 10, Y: 50, W: 30, H: 30, Stroke: half, StrokeWidth: 4},     // aligned bands
		Rect{X: 50.3, Y: 50.3, W: 30, H: 30, Stroke: half, StrokeWidth: 4}, // with a hole
	))
	wantPx(t, img, 25, 25, grey, 3)
	wantPx(t, img, 65, 25, grey, 3)
	// each stroke pixel blended once, corners included
	for _, p := range []image.Point{{9, 49}, {9, 65}, {25, 49}, {40, 80}, {49, 49}, {49, 65}, {80, 80}} {
		wantPx(t, img, p.X, p.Y, grey, 3)
	}
}

func TestPNGLine(t *testing.T) {
	img := render(t, 1, canvas(200, 200,
		Line{X1: 10, Y1: 50, X2: 190, Y2: 50, Stroke: black, Width: 2},
		Line{X1: 10, Y1: 100, X2: 190, Y2: 100, Stroke: black, Width: 2, Dash: true},
		Line{X1: 10.5, Y1: 120, X2: 10.5, Y2: 190, Stroke: black}, // width 1 by default
		Line{X1: 50, Y1: 120, X2: 190, Y2: 190, Stroke: red, Width: 2},
		Line{X1: 50, Y1: 20, X2: 150, Y2: 20, Stroke: None, Width: 2},
	))
	wantPx(t, img, 100, 49, black, 0)
	wantPx(t, img, 100, 50, black, 0)
	wantPx(t, img, 10, 50, black, 0)
	wantPx(t, img, 189, 50, black, 0)
	wantPx(t, img, 9, 50, white, 0) // butt ends
	wantPx(t, img, 190, 50, white, 0)
	wantPx(t, img, 100, 45, white, 0)
	wantPx(t, img, 100, 55, white, 0)

	wantPx(t, img, 10, 150, black, 0)
	wantPx(t, img, 9, 150, white, 0)
	wantPx(t, img, 11, 150, white, 0)

	wantPx(t, img, 120, 155, red, 20) // on the diagonal
	wantPx(t, img, 120, 145, white, 0)
	wantPx(t, img, 120, 165, white, 0)

	wantPx(t, img, 100, 20, white, 0)

	// the dashes: 6 on, 4 off, from the start
	var run strings.Builder
	for x := 10; x < 190; x++ {
		if isWhite(px(img, x, 100)) {
			run.WriteByte('.')
		} else {
			run.WriteByte('#')
		}
		if c := px(img, x, 104); !isWhite(c) {
			t.Errorf("pixel (%d, 104) is %v, 4 px from a dashed line of width 2", x, c)
		}
	}
	want := strings.Repeat("######....", 18)
	if run.String() != want {
		t.Errorf("dashed line:\n%s, want\n%s", run.String(), want)
	}
}

func TestPNGDashScales(t *testing.T) {
	img := render(t, 2, canvas(100, 20, Line{X1: 0, Y1: 10, X2: 100, Y2: 10, Stroke: black, Width: 2, Dash: true}))
	var run strings.Builder
	for x := range 40 {
		if isWhite(px(img, x, 20)) {
			run.WriteByte('.')
		} else {
			run.WriteByte('#')
		}
	}
	if want := strings.Repeat("############........", 2); run.String() != want {
		t.Errorf("dashed line at scale 2:\n%s, want\n%s", run.String(), want)
	}
}

func TestPNGPolyline(t *testing.T) {
	v := []Point{{20, 20}, {50, 80}, {80, 20}}
	img := render(t, 1, canvas(200, 100,
		Polyline{Points: v, Stroke: black, Width: 3},
		Polyline{Points: []Point{{120, 20}, {150, 80}, {180, 20}}, Stroke: Color{A: 128}, Width: 6},
	))
	wantPx(t, img, 35, 50, black, 30) // left arm
	wantPx(t, img, 64, 50, black, 30) // right arm
	wantPx(t, img, 50, 78, black, 30) // at the vertex, where the arms overlap
	wantPx(t, img, 50, 80, black, 30) // below it: the join, not a notch
	wantPx(t, img, 50, 50, white, 0)  // inside the V
	wantPx(t, img, 50, 84, white, 0)
	wantPx(t, img, 20, 17, white, 0) // butt ends
	wantPx(t, img, 80, 17, white, 0)

	// translucent: where the arms overlap, and the join, are blended once
	grey := color.NRGBA{127, 127, 127, 255}
	wantPx(t, img, 135, 50, grey, 3)
	wantPx(t, img, 150, 78, grey, 3)
	wantPx(t, img, 150, 81, grey, 3)
	wantPx(t, img, 150, 84, white, 0)
}

func TestPNGDashedPolyline(t *testing.T) {
	// The dashes run on across the vertex: 8 on the first segment, so 6 on
	// and 2 off, then 2 off and 6 on down the second.
	img := render(t, 1, canvas(100, 100, Polyline{Points: []Point{{10, 10}, {18, 10}, {18, 40}}, Stroke: black, Width: 2, Dash: true}))
	var across, down strings.Builder
	for x := 10; x < 20; x++ {
		if px(img, x, 10).R < 128 {
			across.WriteByte('#')
		} else {
			across.WriteByte('.')
		}
	}
	for y := 10; y < 20; y++ {
		if px(img, 18, y).R < 128 {
			down.WriteByte('#')
		} else {
			down.WriteByte('.')
		}
	}
	if across.String() != "######...." || down.String() != "..######.." {
		t.Errorf("dashes across from x=10 %q, down from y=10 %q; want \"######....\" and \"..######..\"", across.String(), down.String())
	}
}

// ink is the box of the dark pixels of img and their number.
func ink(img image.Image) (box image.Rectangle, n int) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if px(img, x, y).R < 128 {
				box = box.Union(image.Rect(x, y, x+1, y+1))
				n++
			}
		}
	}
	return box, n
}

func TestPNGText(t *testing.T) {
	const X, Y = 100, 40
	hello := func(a Anchor, bold bool) (image.Rectangle, int) {
		img := render(t, 1, canvas(200, 60, Text{X: X, Y: Y, S: "Hello", Size: 14, Anchor: a, Fill: black, Bold: bold}))
		return ink(img)
	}
	start, n := hello(Start, false)
	t.Logf("Start: ink %v, %d dark pixels", start, n)
	if n < 30 {
		t.Fatalf("Hello at size 14: %d dark pixels", n)
	}
	// inside its box: from X about 35 px on, from the cap height to the baseline
	if want := image.Rect(X, Y-12, X+40, Y+1); !start.In(want) {
		t.Errorf("Hello's ink %v is not inside %v", start, want)
	}
	if start.Dx() < 25 || start.Dy() < 8 {
		t.Errorf("Hello's ink %v is too small", start)
	}
	end, _ := hello(End, false)
	if end.Max.X > X {
		t.Errorf("Anchor End: ink %v does not end left of X=%d", end, X)
	}
	if end.Min.X < X-40 {
		t.Errorf("Anchor End: ink %v starts too far left", end)
	}
	mid, _ := hello(Middle, false)
	if c := float64(mid.Min.X+mid.Max.X) / 2; c < X-2 || c > X+2 {
		t.Errorf("Anchor Middle: ink %v is centred on %v, not X=%d", mid, c, X)
	}
	_, nb := hello(Start, true)
	t.Logf("regular %d dark pixels, bold %d", n, nb)
	if nb <= n {
		t.Errorf("bold has %d dark pixels, regular %d", nb, n)
	}

	// scaled: twice the size, at twice the place
	img := render(t, 2, canvas(200, 60, Text{X: X, Y: Y, S: "Hello", Size: 14, Fill: black}))
	box2, _ := ink(img)
	if box2.Min.X < 2*start.Min.X-2 || box2.Min.X > 2*start.Min.X+2 || box2.Dx() < 2*start.Dx()-3 || box2.Dx() > 2*start.Dx()+3 {
		t.Errorf("at scale 2: ink %v, at scale 1 %v", box2, start)
	}

	// no fill: nothing
	img = render(t, 1, canvas(200, 60, Text{X: X, Y: Y, S: "Hello", Size: 14}))
	if _, n := ink(img); n != 0 {
		t.Errorf("Hello with no fill has %d dark pixels", n)
	}
}

func TestPNGOrder(t *testing.T) {
	img := render(t, 1, canvas(100, 100,
		Rect{X: 10, Y: 10, W: 40, H: 40, Fill: red},
		Rect{X: 20, Y: 20, W: 40, H: 40, Fill: blue},
		Line{X1: 0, Y1: 30.5, X2: 100, Y2: 30.5, Stroke: black},
		&Rect{X: 70, Y: 70, W: 10, H: 10, Fill: red}, // pointers work too
		&Rect{X: 75, Y: 75, W: 10, H: 10, Fill: blue},
	))
	wantPx(t, img, 15, 15, red, 0)
	wantPx(t, img, 30, 40, blue, 0)
	wantPx(t, img, 30, 30, black, 0)
	wantPx(t, img, 72, 72, red, 0)
	wantPx(t, img, 77, 77, blue, 0)
}

func TestPNGTooBig(t *testing.T) {
	for _, tc := range []struct {
		cs    []*Canvas
		scale float64
	}{
		{[]*Canvas{canvas(20000, 20000)}, 1},
		{[]*Canvas{canvas(10000, 5000), canvas(10000, 5000)}, 2},
		{[]*Canvas{canvas(1e300, 1e300)}, 1},
	} {
		var b bytes.Buffer
		err := WritePNG(&b, tc.cs, tc.scale)
		if err == nil {
			t.Fatalf("%v×%v at scale %v: no error", tc.cs[0].W, tc.cs[0].H, tc.scale)
		}
		t.Log(err)
		msg := err.Error()
		if !strings.Contains(msg, "megapixels") || !strings.Contains(msg, "--svg") || strings.Contains(msg, "\n") {
			t.Errorf("error %q: want one line with the size and --svg", msg)
		}
		if b.Len() != 0 {
			t.Errorf("wrote %d bytes", b.Len())
		}
	}
	// exactly 200 MP is allowed (checked without making the image)
	if w, h, err := pngSize([]*Canvas{canvas(10000, 2500), canvas(10000, 2484)}, 2); err != nil || w != 20000 || h != 10000 {
		t.Errorf("200 MP: %d×%d, %v", w, h, err)
	}
	if _, _, err := pngSize([]*Canvas{canvas(20000, 10001)}, 1); err == nil {
		t.Errorf("200.02 MP: no error")
	}
}

func TestPNGBadInput(t *testing.T) {
	for name, f := range map[string]func() error{
		"no canvases": func() error { return WritePNG(io.Discard, nil, 1) },
		"nil canvas":  func() error { return WritePNG(io.Discard, []*Canvas{nil}, 1) },
		"scale 0":     func() error { return WritePNG(io.Discard, []*Canvas{canvas(10, 10)}, 0) },
		"scale NaN":   func() error { return WritePNG(io.Discard, []*Canvas{canvas(10, 10)}, nan()) },
		"empty":       func() error { return WritePNG(io.Discard, []*Canvas{canvas(0, 0)}, 1) },
		"negative":    func() error { return WritePNG(io.Discard, []*Canvas{canvas(-5, 10)}, 1) },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Shapes out of the canvas, of odd sizes or with NaNs are not errors.
	n := nan()
	render(t, 1, canvas(50, 50,
		Rect{X: -1e12, Y: -1e12, W: 2e12, H: 2e12, Fill: Color{R: 1, A: 10}},
		Rect{X: n, Y: 0, W: 10, H: 10, Fill: red},
		Rect{X: 40.5, Y: 40.5, W: 1e9, H: 1e9, Fill: red, Stroke: blue},
		Line{X1: -1e9, Y1: -3e9, X2: 1e9, Y2: 2e9, Stroke: red, Dash: true},
		Line{X1: 0, Y1: n, X2: 10, Y2: 10, Stroke: red},
		Line{X1: 5, Y1: 5, X2: 5, Y2: 5, Stroke: red},
		Polyline{Points: []Point{{1, 1}}, Stroke: red},
		Polyline{Points: []Point{{1, 1}, {1, 1}, {1, 1}}, Stroke: red, Dash: true},
		Polyline{Points: []Point{{1, 1}, {n, 1}}, Stroke: red},
		Text{X: 10, Y: 10, S: "x", Size: 1e9, Fill: black},
		Text{X: n, Y: 10, S: "x", Size: 10, Fill: black},
		Text{X: 10, Y: 10, S: "x", Size: -3, Fill: black},
		Text{X: 10, Y: 10, S: "\xff\x00 ü 漢", Size: 10, Fill: black},
		(*Rect)(nil),
	))
}

func nan() float64 { z := 0.0; return z / z }

// Figures can be written from several goroutines at once (faces are
// shared).
func TestPNGConcurrent(t *testing.T) {
	want := render(t, 1, canvas(120, 30, Text{X: 5, Y: 20, S: "Hello, farm", Size: 12, Fill: black}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				got, err := renderErr(1, canvas(120, 30, Text{X: 5, Y: 20, S: "Hello, farm", Size: 12, Fill: black}))
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(got.(*image.RGBA).Pix, want.(*image.RGBA).Pix) {
					t.Error("concurrent renders differ")
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchTimeline is a 1200×800 canvas of 20,000 small rects, as a timeline's:
// 100 rows of bars, at times that do not fall on pixels unless aligned.
func benchTimeline(aligned bool) *Canvas {
	c := &Canvas{ID: "timeline", W: 1200, H: 800}
	rng := rand.New(rand.NewPCG(1, 2))
	colors := []Color{{R: 31, G: 119, B: 180, A: 255}, {R: 214, G: 39, B: 40, A: 255}, {R: 44, G: 160, B: 44, A: 200}}
	for i := range 20000 {
		x, y, w := 60+rng.Float64()*1100, 20+float64(i%100)*7.5, 0.5+rng.Float64()*30
		if aligned {
			x, y, w = float64(int(x)), float64(int(y)), float64(int(w)+1)
		}
		c.Add(Rect{X: x, Y: y, W: w, H: 6, Fill: colors[i%len(colors)]})
	}
	return c
}

func BenchmarkWritePNG20000Rects(b *testing.B) {
	cs := []*Canvas{benchTimeline(false)}
	for b.Loop() {
		if err := WritePNG(io.Discard, cs, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWritePNG20000AlignedRects(b *testing.B) {
	cs := []*Canvas{benchTimeline(true)}
	for b.Loop() {
		if err := WritePNG(io.Discard, cs, 1); err != nil {
			b.Fatal(err)
		}
	}
}
