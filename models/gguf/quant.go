package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/posttrain/posttrain/models/safetensors"
)

// The quantisers follow ggml-quants.c's reference functions (quantize_row_<type>_ref, what
// ggml_quantize_chunk runs without an importance matrix, so what llama-quantize writes without
// --imatrix) operation for operation in float32. Products that feed a sum are rounded explicitly
// (float32(a*b)): Go may fuse a*b+c into an FMA, C on x86-64 without -mfma does not, and one
// differently rounded sum can flip a quant. The results are byte-equal to ggml's
// (TestQuantize_MatchesGGML).

// quantFunc quantises one block of x (len = the type's block size) into dst (the block's bytes).
type quantFunc func(dst []byte, x []float32)

var quantFuncs = map[Type]quantFunc{
	F32:  func(dst []byte, x []float32) { binary.LittleEndian.PutUint32(dst, math.Float32bits(x[0])) },
	F16:  func(dst []byte, x []float32) { putF16(dst, x[0]) },
	BF16: func(dst []byte, x []float32) { binary.LittleEndian.PutUint16(dst, safetensors.Float32ToBF16(x[0])) },
	Q8_0: quantQ8_0, Q5_0: quantQ5_0, Q4_K: quantQ4_K, Q6_K: quantQ6_K,
}

// CanQuantize reports whether Quantize supports t.
func CanQuantize(t Type) bool { _, ok := quantFuncs[t]; return ok }

// Quantize encodes x (a whole number of t's blocks) as t: F32, F16, BF16 (round to nearest even),
// Q8_0, Q5_0, Q4_K or Q6_K.
func Quantize(t Type, x []float32) ([]byte, error) {
	f, ok := quantFuncs[t]
	if !ok {
		return nil, fmt.Errorf("quantising to %s is not supported (supported: F32, F16, BF16, Q8_0, Q5_0, Q4_K, Q6_K)", t)
	}
	bs, bb := t.BlockSize(), t.BlockBytes()
	n := int64(len(x))
	if n%bs != 0 {
		return nil, fmt.Errorf("%s: %d elements is not a whole number of blocks of %d", t, n, bs)
	}
	out := make([]byte, n/bs*bb)
	for i := int64(0); i < n/bs; i++ {
		f(out[i*bb:(i+1)*bb], x[i*bs:(i+1)*bs])
	}
	return out, nil
}

func putF16(dst []byte, v float32) { binary.LittleEndian.PutUint16(dst, safetensors.Float32ToF16(v)) }

// fp16Round is GGML_FP16_TO_FP32(GGML_FP32_TO_FP16(v)).
func fp16Round(v float32) float32 { return safetensors.F16ToFloat32(safetensors.Float32ToF16(v)) }

// nearestInt is ggml's nearest_int: round to nearest, ties to even, by adding 1.5·2^23 (exact for
// |v| ≤ 2^22).
func nearestInt(v float32) int {
	b := int32(math.Float32bits(v + 12582912))
	return int(b&0x007fffff) - 0x00400000
}

// quantQ8_0 is quantize_row_q8_0_ref for one block: d = max|x|/127, q = round(x/d) (half away
// from zero, roundf).
func quantQ8_0(y []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	for j, v := range x {
		y[2+j] = byte(int8(math.Round(float64(float32(v * id)))))
	}
}

// quantQ5_0 is quantize_row_q5_0_ref for one block: d = max/−16 (max the signed value of largest
// magnitude), q = min(31, trunc(x/d + 16.5)); the 5th bits go to qh.
func quantQ5_0(y []byte, x []float32) {
	var amax, mx float32
	for _, v := range x {
		if amax < abs32(v) {
			amax, mx = abs32(v), v
		}
	}
	d := mx / -16
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	var qh uint32
	qs := y[6:22]
	for j := range 16 {
		x0, x1 := float32(x[j]*id), float32(x[16+j]*id)
		xi0 := uint8(min(31, int8(x0+16.5)))
		xi1 := uint8(min(31, int8(x1+16.5)))
		qs[j] = xi0&0x0f | (xi1&0x0f)<<4
		qh |= uint32(xi0&0x10) >> 4 << j
		qh |= uint32(xi1&0x10) >> 4 << (j + 16)
	}
	binary.LittleEndian.PutUint32(y[2:], qh)
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// quantQ4_K is quantize_row_q4_K_ref for one block of 256: per sub-block of 32 a scale and a min
// from makeQKX2Quants (weights av_x + |x|, av_x the sub-block's RMS), the 8 scales and mins
// quantised to 6 bits against d = max_scale/63 and dmin = max_min/63, then every x requantised
// to q = round((x + dmin·m)/(d·sc)) in [0, 15].
func quantQ4_K(y []byte, x []float32) {
	var L [256]uint8
	var laux [32]uint8
	var weights [32]float32
	var mins, scales [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j] = makeQKX2Quants(15, xs, weights[:], L[32*j:32*j+32], &mins[j], laux[:], -1, 0.1, 20)
		maxScale = max(maxScale, scales[j])
		maxMin = max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := y[4:16]
	for j := range 8 {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&0x0f | (lm&0x0f)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putF16(y, maxScale/63)
	putF16(y[2:], maxMin/63)
	d16, dmin16 := fp16Round(maxScale/63), fp16Round(maxMin/63)
	for j := range 8 {
		s, m := scaleMinK4(j, sc)
		d := float32(d16 * float32(s))
		if d == 0 {
			continue
		}
		dm := float32(dmin16 * float32(m))
		for ii := range 32 {
			l := nearestInt((x[32*j+ii] + dm) / d)
			L[32*j+ii] = uint8(max(0, min(15, l)))
		}
	}
	qs := y[16:144]
	for j := 0; j < 256; j += 64 {
		for l := range 32 {
			qs[l] = L[j+l] | L[j+l+32]<<4
		}
		qs = qs[32:]
	}
}

// makeQKX2Quants is make_qkx2_quants(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep,
// use_mad=false): the scale s and min m (returned as −m in *theMin) minimising Σ w·(s·q + m − x)²
// over q in [0, nmax], searching nstep+1 candidate scales around nmax/(max − min).
func makeQKX2Quants(nmax int, x, weights []float32, L []uint8, theMin *float32, laux []uint8, rmin, rdelta float32, nstep int) float32 {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		mn, mx = min(mn, x[i]), max(mx, x[i])
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		for i := range n {
			L[i] = 0
		}
		*theMin = -mn
		return 0
	}
	fmax := float32(nmax)
	iscale := fmax / (mx - mn)
	scale := 1 / iscale
	var bestError float32
	for i := range n {
		l := nearestInt(float32(iscale * (x[i] - mn)))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(float32(scale*float32(L[i]))+mn) - x[i]
		bestError += float32(weights[i] * float32(diff*diff))
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + fmax) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := range n {
			l := max(0, min(nmax, nearestInt(float32(iscale*(x[i]-mn)))))
			laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if !(D > 0) { // NaN too, as C's if (D > 0)
			continue
		}
		thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
		thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		var curError float32
		for i := range n {
			diff := float32(float32(thisScale*float32(laux[i]))+thisMin) - x[i]
			curError += float32(weights[i] * float32(diff*diff))
		}
		if curError < bestError {
			copy(L[:n], laux[:n])
			bestError, scale, mn = curError, thisScale, thisMin
		}
	}
	*theMin = -mn
	return scale
}

// groupMaxEps is ggml-quants.c's GROUP_MAX_EPS: a group below it is all zeros.
const groupMaxEps = 1e-15

// quantQ6_K is quantize_row_q6_K_ref for one block of 256: 16 sub-blocks of 16 each get a scale
// from makeQXQuants (nmax 32, weights x²); the scales are quantised to int8 against
// d = max_scale/−128, then every x requantised to q = round(x/(d·sc)) + 32 in [0, 63] (4 bits in
// ql, 2 in qh).
func quantQ6_K(y []byte, x []float32) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbsScale float32
	for ib := range 16 {
		s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
		scales[ib] = s
		if abs32(s) > maxAbsScale {
			maxAbsScale, maxScale = abs32(s), s
		}
	}
	if maxAbsScale < groupMaxEps {
		clear(y)
		return
	}
	iscale := -128 / maxScale
	putF16(y[208:], 1/iscale)
	sc := y[192:208]
	for ib := range 16 {
		sc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
	}
	d16 := fp16Round(1 / iscale)
	for j := range 16 {
		d := float32(d16 * float32(int8(sc[j])))
		if d == 0 {
			continue
		}
		for ii := range 16 {
			l := nearestInt(x[16*j+ii] / d)
			L[16*j+ii] = int8(max(-32, min(31, l)) + 32)
		}
	}
	ql, qh := y[0:128], y[128:192]
	for j := 0; j < 256; j += 128 {
		for l := range 32 {
			q1, q2, q3, q4 := uint8(L[j+l]), uint8(L[j+l+32]), uint8(L[j+l+64]), uint8(L[j+l+96])
			ql[l] = q1&0x0f | (q3&0x0f)<<4
			ql[l+32] = q2&0x0f | (q4&0x0f)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
		ql, qh = ql[64:], qh[32:]
	}
}

// makeQXQuants is make_qx_quants(n, nmax, x, L, rmse_type=1, qw=NULL): the signed scale s
// maximising (Σ w·x·q)²/Σ w·q² with w = x², q in [−nmax, nmax−1] (stored + nmax in L), over 19
// candidate scales −(nmax + 0.1·k)/max, k = −9..9.
func makeQXQuants(nmax int, x []float32, L []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if abs32(v) > amax {
			amax, mx = abs32(v), v
		}
	}
	if amax < groupMaxEps {
		for i := range L {
			L[i] = 0
		}
		return 0
	}
	fmax := float32(nmax)
	iscale := -fmax / mx
	quant := func(v, iscale float32) int { return max(-nmax, min(nmax-1, nearestInt(float32(iscale*v)))) }
	var sumLX, sumL2 float32
	for i, v := range x {
		l := quant(v, iscale)
		L[i] = int8(l + nmax)
		w, fl := float32(v*v), float32(l)
		sumLX += float32(float32(w*v) * fl)
		sumL2 += float32(float32(w*fl) * fl)
	}
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := float32(scale * sumLX)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fmax + float32(float32(0.1)*float32(is))) / mx
		sumLX, sumL2 = 0, 0
		for _, v := range x {
			l := quant(v, iscale)
			w, fl := float32(v*v), float32(l)
			sumLX += float32(float32(w*v) * fl)
			sumL2 += float32(float32(w*fl) * fl)
		}
		if sumL2 > 0 && float32(sumLX*sumLX) > float32(best*sumL2) {
			for i, v := range x {
				L[i] = int8(nmax + quant(v, iscale))
			}
			scale = sumLX / sumL2
			best = float32(scale * sumLX)
		}
	}
	return scale
}
