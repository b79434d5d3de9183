package workload

import (
	"slices"
	"strconv"
	"testing"
)

// Expected values in this file come from CPython 3.11's random module, e.g.
// python3 -c 'import random; r=random.Random(0); print([r.getrandbits(32) for _ in range(3)], repr(r.random()))'

func TestRandMatchesCPythonSeeding(t *testing.T) {
	cases := []struct {
		seed  int64
		words [3]uint32
		then  float64
	}{
		{0, [3]uint32{3626764237, 1654615998, 3255389356}, 0.890243920837131},
		{1, [3]uint32{577090037, 2444712010, 3639700191}, 0.8022650611681835},
		{2, [3]uint32{4106135923, 3707026329, 4070888059}, 0.8490552757423473},
		{3, [3]uint32{1022050301, 2545373330, 2337446730}, 0.13042279608514273},
		{42, [3]uint32{2746317213, 478163327, 107420369}, 0.7415504997598329},
		{1<<32 + 5, [3]uint32{675479763, 2085189291, 1213270837}, 0.8899258643720599}, // two key words
		{-7, [3]uint32{1390851128, 4071050724, 647892279}, 0.3948234964231735},        // |seed| is used
	}
	for _, c := range cases {
		t.Run(strconv.FormatInt(c.seed, 10), func(t *testing.T) {
			r := NewRand(c.seed)
			var got [3]uint32
			for i := range got {
				got[i] = uint32(r.Bits(32))
			}
			if got != c.words {
				t.Errorf("getrandbits(32) x3 = %v, want %v", got, c.words)
			}
			if f := r.Float64(); f != c.then {
				t.Errorf("random() = %v, want %v", f, c.then)
			}
		})
	}
}

func TestRandAfterTwist(t *testing.T) {
	// 700 floats consume 1400 words: the state has been regenerated twice.
	r := NewRand(1)
	for range 700 {
		r.Float64()
	}
	if got, want := r.Float64(), 0.0601840957099572; got != want {
		t.Errorf("random() #701 = %v, want %v", got, want)
	}
}

func TestRandIntegers(t *testing.T) {
	r := NewRand(5)
	if got, want := []uint64{r.Bits(40), r.Bits(40)}, []uint64{281848216645, 394027974809}; !slices.Equal(got, want) {
		t.Errorf("getrandbits(40) = %v, want %v", got, want)
	}
	var below []int
	for range 8 {
		below = append(below, r.Below(26))
	}
	if want := []int{25, 22, 23, 20, 16, 0, 14, 24}; !slices.Equal(below, want) {
		t.Errorf("randrange(26) = %v, want %v", below, want)
	}
}

func TestRandShuffleAndSample(t *testing.T) {
	x := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	NewRand(6).Shuffle(len(x), func(i, j int) { x[i], x[j] = x[j], x[i] })
	if want := []int{5, 8, 3, 4, 0, 2, 6, 7, 1, 9}; !slices.Equal(x, want) {
		t.Errorf("shuffle = %v, want %v", x, want)
	}
	r := NewRand(7)
	cases := []struct {
		n, k int
		want []int
	}{
		{10, 2, []int{5, 2}},                     // pool method
		{30, 2, []int{12, 20}},                   // set method
		{100, 7, []int{6, 9, 68, 12, 46, 74, 7}}, // larger set size threshold
	}
	for _, c := range cases {
		if got := r.Sample(c.n, c.k); !slices.Equal(got, c.want) {
			t.Errorf("sample(range(%d), %d) = %v, want %v", c.n, c.k, got, c.want)
		}
	}
	if got := r.Sample(3, 4); got != nil {
		t.Errorf("sample larger than population = %v, want nil", got)
	}
}

func TestRandContinuousDraws(t *testing.T) {
	r := NewRand(3)
	lam := 3600 / 5.6
	for i, want := range []float64{174.7043377930725, 505.1348247277102, 296.97704866235114} {
		if got := r.ExpGap(lam); got != want {
			t.Errorf("gap %d = %v, want %v", i, got, want)
		}
	}
	r = NewRand(9)
	for i, want := range []float64{2.194511036722532, 2.0599678970925632} {
		if got := r.Uniform(1.5, 3); got != want {
			t.Errorf("uniform %d = %v, want %v", i, got, want)
		}
	}
	if got := NewRand(0).ExpGap(0); got != 0 {
		t.Errorf("gap with lam 0 = %v, want 0", got)
	}
}
