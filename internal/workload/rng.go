package workload

import (
	"math"
	"math/bits"
)

// Rand is a Mersenne Twister (MT19937) stream that reproduces CPython's
// random.Random bit for bit: the same seed gives the same random(),
// getrandbits, choice, shuffle and sample results. Matching CPython is what
// makes generated workloads identical to those of the reference simulator,
// so the algorithm details below (seeding by init_by_array, 53-bit floats
// from two words, rejection sampling for bounded integers) are fixed.
type Rand struct {
	mt  [mtN]uint32
	idx int
}

const (
	mtN         = 624
	mtM         = 397
	matrixA     = 0x9908b0df
	upperMask   = 0x80000000
	lowerMask   = 0x7fffffff
	initialSeed = 19650218
)

// NewRand seeds a stream like CPython's random.Random(seed): the key is the
// 32-bit little-endian words of |seed| (a single 0 word for seed 0).
func NewRand(seed int64) *Rand {
	mag := uint64(seed)
	if seed < 0 {
		mag = uint64(-seed) // -MinInt64 wraps to its own magnitude as uint64
	}
	key := []uint32{uint32(mag)}
	if hi := uint32(mag >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &Rand{}
	r.initByArray(key)
	return r
}

func (r *Rand) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < mtN; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.idx = mtN
}

func (r *Rand) initByArray(key []uint32) {
	r.initGenrand(initialSeed)
	i, j := 1, 0
	k := max(mtN, len(key))
	for ; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = mtN - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000 // the most significant bit is 1: a non-zero initial state
}

// Uint32 returns the next 32-bit output of the generator.
func (r *Rand) Uint32() uint32 {
	if r.idx >= mtN {
		r.twist()
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

func (r *Rand) twist() {
	for i := 0; i < mtN; i++ {
		y := (r.mt[i] & upperMask) | (r.mt[(i+1)%mtN] & lowerMask)
		next := r.mt[(i+mtM)%mtN] ^ (y >> 1)
		if y&1 != 0 {
			next ^= matrixA
		}
		r.mt[i] = next
	}
	r.idx = 0
}

// Float64 is CPython's random(): a float in [0, 1) with 53 random bits.
func (r *Rand) Float64() float64 {
	a := r.Uint32() >> 5
	b := r.Uint32() >> 6
	return (float64(a)*67108864.0 + float64(b)) * (1.0 / 9007199254740992.0)
}

// Uniform is CPython's uniform(a, b): a + (b-a)*random().
func (r *Rand) Uniform(a, b float64) float64 { return Uniform(r, a, b) }

// Bits is CPython's getrandbits(k) for 0 <= k <= 64: whole 32-bit words
// fill the low bits first, the last word keeps its top bits.
func (r *Rand) Bits(k int) uint64 {
	if k <= 0 {
		return 0
	}
	if k <= 32 {
		return uint64(r.Uint32() >> (32 - k))
	}
	lo := uint64(r.Uint32())
	hi := uint64(r.Uint32() >> (64 - min(k, 64)))
	return lo | hi<<32
}

// Below is CPython's _randbelow(n) (also randrange(n)): a uniform integer
// in [0, n) by rejection sampling on n.bit_length() random bits. n must be
// positive; Below(0) returns 0 rather than looping.
func (r *Rand) Below(n int) int {
	if n <= 0 {
		return 0
	}
	k := bits.Len64(uint64(n))
	v := r.Bits(k)
	for v >= uint64(n) {
		v = r.Bits(k)
	}
	return int(v)
}

// Choice is the index CPython's choice(seq) picks for a sequence of length n.
func (r *Rand) Choice(n int) int { return r.Below(n) }

// Shuffle permutes n elements in place like CPython's shuffle(x).
func (r *Rand) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, r.Below(i+1))
	}
}

// Sample returns the indices CPython's sample(population, k) picks from a
// population of n, in selection order. It uses the same two methods as
// CPython (a shrinking pool for small populations, rejection against the
// already chosen set otherwise) because they consume the stream differently.
func (r *Rand) Sample(n, k int) []int {
	if k < 0 || k > n {
		return nil
	}
	out := make([]int, k)
	setSize := 21
	if k > 5 {
		setSize += int(math.Pow(4, math.Ceil(math.Log(float64(k*3))/math.Log(4))))
	}
	if n <= setSize {
		pool := make([]int, n)
		for i := range pool {
			pool[i] = i
		}
		for i := 0; i < k; i++ {
			j := r.Below(n - i)
			out[i] = pool[j]
			pool[j] = pool[n-i-1]
		}
		return out
	}
	chosen := make(map[int]bool, k)
	for i := 0; i < k; i++ {
		j := r.Below(n)
		for chosen[j] {
			j = r.Below(n)
		}
		chosen[j] = true
		out[i] = j
	}
	return out
}

// ExpGap is the reference simulator's Poisson inter-arrival draw:
// -log(1-U) / (1/lam) for mean gap lam seconds. It is written with the same
// operations as the reference so the gaps agree to the last bit; lam == 0
// gives 0 (all jobs at once) without drawing.
func (r *Rand) ExpGap(lam float64) float64 {
	if lam == 0 {
		return 0
	}
	u := r.Float64()
	return -libmLog(1.0-u) / (1.0 / lam)
}
