package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/posttrain/posttrain/models/safetensors"
)

// Each block function follows ggml-quants.c's dequantize_row_<type> for one block, operation for
// operation in float32. The result does not depend on the order of the operations: an f16 scale
// has 11 significant bits, and the integers it multiplies have at most 12 (Q6_K: int8 scale × 6-bit
// quant), so every product is exact in float32's 24; the one rounding is the final + m or − dmin·m.
// The float32(…) around products only makes that explicit (Go may fuse a*b+c into an FMA, which
// cannot change an exact product's sum either).

// blockFunc dequantises one block src into dst (len(dst) = the type's block size).
type blockFunc func(dst []float32, src []byte)

var blockFuncs = map[Type]blockFunc{
	F32: func(dst []float32, src []byte) { dst[0] = math.Float32frombits(binary.LittleEndian.Uint32(src)) },
	F16: func(dst []float32, src []byte) {
		dst[0] = safetensors.F16ToFloat32(binary.LittleEndian.Uint16(src))
	},
	BF16: func(dst []float32, src []byte) {
		dst[0] = safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(src))
	},
	Q8_0: dequantQ8_0, Q4_0: dequantQ4_0, Q4_1: dequantQ4_1, Q5_0: dequantQ5_0, Q5_1: dequantQ5_1,
	Q4_K: dequantQ4_K, Q5_K: dequantQ5_K, Q6_K: dequantQ6_K,
}

// CanDequantize reports whether Dequantize supports t.
func CanDequantize(t Type) bool { _, ok := blockFuncs[t]; return ok }

// Dequantize converts n elements of type t stored in data (exactly n/blockSize blocks) to float32.
func Dequantize(t Type, data []byte, n int64) ([]float32, error) {
	if err := checkBlocks(t, n, data); err != nil {
		return nil, err
	}
	out := make([]float32, n)
	if err := dequantizeInto(t, out, data); err != nil {
		return nil, err
	}
	return out, nil
}

// checkBlocks: t is supported and data holds exactly the n/blockSize blocks of n elements.
func checkBlocks(t Type, n int64, data []byte) error {
	if _, ok := blockFuncs[t]; !ok {
		return fmt.Errorf("dequantising %s is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", t)
	}
	bs, bb := t.BlockSize(), t.BlockBytes()
	if n < 0 || n%bs != 0 {
		return fmt.Errorf("%s: %d elements is not a whole number of blocks of %d", t, n, bs)
	}
	if want := n / bs * bb; int64(len(data)) != want {
		return fmt.Errorf("%s: %d elements need %d bytes, got %d", t, n, want, len(data))
	}
	return nil
}

// dequantizeInto is Dequantize into dst (len(dst) elements).
func dequantizeInto(t Type, dst []float32, data []byte) error {
	n := int64(len(dst))
	if err := checkBlocks(t, n, data); err != nil {
		return err
	}
	f, bs, bb := blockFuncs[t], t.BlockSize(), t.BlockBytes()
	for i := int64(0); i < n/bs; i++ {
		f(dst[i*bs:(i+1)*bs], data[i*bb:(i+1)*bb])
	}
	return nil
}

func f16(b []byte) float32 { return safetensors.F16ToFloat32(binary.LittleEndian.Uint16(b)) }

// dequantQ8_0 is dequantize_row_q8_0 for one block: block_q8_0 {f16 d; int8 qs[32]}; y[j] =
// qs[j]·d.
func dequantQ8_0(y []float32, x []byte) {
	d := f16(x)
	for j := range 32 {
		y[j] = float32(int8(x[2+j])) * d
	}
}

// dequantQ4_0 is dequantize_row_q4_0 for one block: block_q4_0 {f16 d; u8 qs[16]}; low nibble of
// qs[j] is element j, high nibble element j+16; y = (q − 8)·d.
func dequantQ4_0(y []float32, x []byte) {
	d, qs := f16(x), x[2:18]
	for j := range 16 {
		y[j] = float32(int(qs[j]&0x0f)-8) * d
		y[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

// dequantQ4_1 is dequantize_row_q4_1 for one block: block_q4_1 {f16 d, m; u8 qs[16]}; y = q·d + m.
func dequantQ4_1(y []float32, x []byte) {
	d, m, qs := f16(x), f16(x[2:]), x[4:20]
	for j := range 16 {
		y[j] = float32(float32(qs[j]&0x0f)*d) + m
		y[j+16] = float32(float32(qs[j]>>4)*d) + m
	}
}

// dequantQ5_0 is dequantize_row_q5_0 for one block: block_q5_0 {f16 d; u8 qh[4]; u8 qs[16]}; bit j
// of the little-endian u32 qh is the 5th bit of element j, bit j+16 that of element j+16; y = (q −
// 16)·d.
func dequantQ5_0(y []float32, x []byte) {
	d, qh, qs := f16(x), binary.LittleEndian.Uint32(x[2:]), x[6:22]
	for j := range 16 {
		h0 := uint8((qh>>j)<<4) & 0x10
		h1 := uint8(qh>>(j+12)) & 0x10
		y[j] = float32(int(qs[j]&0x0f|h0)-16) * d
		y[j+16] = float32(int(qs[j]>>4|h1)-16) * d
	}
}

// dequantQ5_1 is dequantize_row_q5_1 for one block: block_q5_1 {f16 d, m; u8 qh[4]; u8 qs[16]}; y =
// q·d + m.
func dequantQ5_1(y []float32, x []byte) {
	d, m, qh, qs := f16(x), f16(x[2:]), binary.LittleEndian.Uint32(x[4:]), x[8:24]
	for j := range 16 {
		h0 := uint8((qh>>j)<<4) & 0x10
		h1 := uint8(qh>>(j+12)) & 0x10
		y[j] = float32(float32(qs[j]&0x0f|h0)*d) + m
		y[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
	}
}

// scaleMinK4 is get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) packed in the
// 12 bytes q (j < 4: low 6 bits of q[j] and q[j+4]; else nibbles of q[j+4] plus the top 2 bits of
// q[j−4] and q[j]).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0x0f | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// dequantQ4_K is dequantize_row_q4_K for one block: block_q4_K {f16 d, dmin; u8 scales[12]; u8
// qs[128]}, 256 elements in 4 chunks of 64; chunk c uses qs[32c:32c+32], low nibbles with sub-block
// 2c, high nibbles with 2c+1; y = (d·sc)·q − dmin·m.
func dequantQ4_K(y []float32, x []byte) {
	d, dmin, scales, qs := f16(x), f16(x[2:]), x[4:16], x[16:144]
	for c := range 4 {
		sc1, m1 := scaleMinK4(2*c, scales)
		sc2, m2 := scaleMinK4(2*c+1, scales)
		d1, mm1 := d*float32(sc1), dmin*float32(m1)
		d2, mm2 := d*float32(sc2), dmin*float32(m2)
		q, out := qs[32*c:], y[64*c:]
		for l := range 32 {
			out[l] = float32(d1*float32(q[l]&0x0f)) - mm1
			out[l+32] = float32(d2*float32(q[l]>>4)) - mm2
		}
	}
}

// dequantQ5_K is dequantize_row_q5_K for one block: block_q5_K {f16 d, dmin; u8 scales[12]; u8
// qh[32]; u8 qs[128]}: Q4_K with a 5th bit, bit 2c of qh[l] for the low nibbles of chunk c and bit
// 2c+1 for the high ones.
func dequantQ5_K(y []float32, x []byte) {
	d, dmin, scales, qh, qs := f16(x), f16(x[2:]), x[4:16], x[16:48], x[48:176]
	for c := range 4 {
		sc1, m1 := scaleMinK4(2*c, scales)
		sc2, m2 := scaleMinK4(2*c+1, scales)
		d1, mm1 := d*float32(sc1), dmin*float32(m1)
		d2, mm2 := d*float32(sc2), dmin*float32(m2)
		u1, u2 := uint8(1)<<(2*c), uint8(2)<<(2*c)
		q, out := qs[32*c:], y[64*c:]
		for l := range 32 {
			lo, hi := q[l]&0x0f, q[l]>>4
			if qh[l]&u1 != 0 {
				lo += 16
			}
			if qh[l]&u2 != 0 {
				hi += 16
			}
			out[l] = float32(d1*float32(lo)) - mm1
			out[l+32] = float32(d2*float32(hi)) - mm2
		}
	}
}

// dequantQ6_K is dequantize_row_q6_K for one block: block_q6_K {u8 ql[128]; u8 qh[64]; int8
// scales[16]; f16 d}, 256 elements in 2 halves of 128; in half h, element l+32k (k = 0..3) takes 4
// bits of ql and 2 of qh and the scale scales[8h + l/16 + 2k]; y = (d·sc)·(q − 32).
func dequantQ6_K(y []float32, x []byte) {
	d := f16(x[208:])
	for h := range 2 {
		ql, qh, sc, out := x[64*h:], x[128+32*h:], x[192+8*h:], y[128*h:]
		for l := range 32 {
			is := l / 16
			q1 := int(ql[l]&0x0f|(qh[l]>>0&3)<<4) - 32
			q2 := int(ql[l+32]&0x0f|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			out[l] = d * float32(int8(sc[is])) * float32(q1)
			out[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			out[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			out[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
	}
}
