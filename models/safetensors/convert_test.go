package safetensors

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// Bit patterns from IEEE 754 binary16 and bfloat16 tables (e.g. Wikipedia's half-precision and
// bfloat16 articles); ties round to even as PyTorch's .to(torch.bfloat16/float16) does.
func TestFloat32ToF16_KnownValues(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},                       // largest half
		{65519.99, 0x7bff},                    // below the midpoint to Inf
		{65520, 0x7c00},                       // midpoint: ties to even = Inf
		{1e6, 0x7c00},                         // overflow
		{float32(math.Inf(-1)), 0xfc00},       // -Inf
		{1.0 / 3, 0x3555},                     // 0.333251953125
		{0.1, 0x2e66},                         // 0.0999755859375
		{float32(math.Ldexp(1, -14)), 0x0400}, // smallest normal
		{float32(math.Ldexp(1, -24)), 0x0001}, // smallest subnormal
		{float32(math.Ldexp(1, -25)), 0x0000}, // half of it: tie to even = 0
		{float32(math.Ldexp(3, -26)), 0x0001}, // 0.75 of it rounds up
		{float32(math.Ldexp(3, -25)), 0x0002}, // 1.5 × min subnormal: tie to even = 2
		{float32(math.Ldexp(1023, -24)), 0x03ff},
		{1 + float32(math.Ldexp(1, -11)), 0x3c00}, // tie between 0x3c00 and 0x3c01: even
		{1 + float32(math.Ldexp(3, -11)), 0x3c02}, // tie between 0x3c01 and 0x3c02: even
		{2049, 0x6800},                            // 2048 (tie, even)
		{2051, 0x6802},                            // 2052 (tie, even)
	}
	for _, tc := range tests {
		if got := Float32ToF16(tc.in); got != tc.want {
			t.Errorf("Float32ToF16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if got := Float32ToF16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("Float32ToF16(NaN) = %#04x, not a NaN", got)
	}
}

func TestF16ToFloat32_AllValuesRoundTrip(t *testing.T) {
	checks := map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: float32(math.Ldexp(1, -24)), 0x03ff: float32(math.Ldexp(1023, -24)), 0x3555: 0.333251953125}
	for h, want := range checks {
		if got := F16ToFloat32(h); got != want {
			t.Errorf("F16ToFloat32(%#04x) = %g, want %g", h, got, want)
		}
	}
	if !math.IsInf(float64(F16ToFloat32(0xfc00)), -1) || !math.IsNaN(float64(F16ToFloat32(0x7e00))) {
		t.Error("Inf/NaN not preserved")
	}
	// Every non-NaN half survives f16 → f32 → f16 exactly.
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue
		}
		if got := Float32ToF16(F16ToFloat32(uint16(h))); got != uint16(h) {
			t.Fatalf("round trip %#04x → %g → %#04x", h, F16ToFloat32(uint16(h)), got)
		}
	}
}

func TestFloat32ToBF16_KnownValues(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{1, 0x3f80},
		{-2, 0xc000},
		{math.Pi, 0x4049},                        // 3.140625
		{0.1, 0x3dcd},                            // 0.10009765625
		{1 + float32(math.Ldexp(1, -8)), 0x3f80}, // tie: even
		{1 + float32(math.Ldexp(3, -8)), 0x3f82}, // tie: even (up)
		{math.MaxFloat32, 0x7f80},                // rounds to Inf
		{float32(math.Inf(-1)), 0xff80},
		{float32(math.Ldexp(1, -133)), 0x0001}, // smallest bf16 subnormal
	}
	for _, tc := range tests {
		if got := Float32ToBF16(tc.in); got != tc.want {
			t.Errorf("Float32ToBF16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if got := Float32ToBF16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("Float32ToBF16(NaN) = %#04x, not a NaN", got)
	}
	for h := 0; h < 1<<16; h++ {
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			continue
		}
		if got := Float32ToBF16(BF16ToFloat32(uint16(h))); got != uint16(h) {
			t.Fatalf("round trip %#04x → %#04x", h, got)
		}
	}
}

func TestFloat32s_ConvertsDTypes(t *testing.T) {
	in := []float32{1, -2, 0.1, 65504}
	for _, dtype := range []string{"F32", "BF16", "F16", "F64"} {
		tt := FromFloat32s("w", []int{2, 2}, in, dtype)
		got, err := tt.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		got64, err := tt.Float64s()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]float32{
			"F32": in, "F64": in,
			"BF16": {1, -2, 0.10009765625, 65536},
			"F16":  {1, -2, 0.0999755859375, 65504},
		}[dtype]
		for i := range want {
			if got[i] != want[i] || got64[i] != float64(want[i]) {
				t.Errorf("%s: element %d = %g / %g, want %g", dtype, i, got[i], got64[i], want[i])
			}
		}
	}
	if _, err := (&Tensor{Name: "ids", DType: "I64", Shape: []int{1}, Data: make([]byte, 8)}).Float32s(); err == nil {
		t.Error("I64 converted to float32 without error")
	}
	if _, err := (&Tensor{Name: "w", DType: "F32", Shape: []int{3}, Data: make([]byte, 8)}).Float32s(); err == nil {
		t.Error("short data converted without error")
	}
}

// Float32ToF16 agrees with CPython's independent implementation (testdata/README.md).
func TestFloat32ToF16_MatchesPythonStruct(t *testing.T) {
	b, err := os.ReadFile("testdata/f16_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Pairs [][2]uint32 `json:"f32_bits_to_f16_bits"`
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Pairs) != 350 {
		t.Fatalf("golden has %d pairs, want 350", len(golden.Pairs))
	}
	for _, p := range golden.Pairs {
		in := math.Float32frombits(p[0])
		if got := Float32ToF16(in); uint32(got) != p[1] {
			t.Errorf("Float32ToF16(%g = %#08x) = %#04x, Python gives %#04x", in, p[0], got, p[1])
		}
	}
}

// A tensor large enough to be decoded in slices on several goroutines gives every value where a
// one-element tensor of it would put it (the slices' bounds land on whole elements of every
// dtype), and a destination of the wrong length is refused.
func TestDecodeFloat32s_SlicedEqualsElementwise(t *testing.T) {
	n := 3*parallelDecodeMin + 7
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i%1000)/7 - float32(i%13)
	}
	for _, dtype := range []string{"F32", "BF16", "F16", "F64"} {
		tt := FromFloat32s("w", []int{n}, in, dtype)
		got := make([]float32, n)
		if err := tt.DecodeFloat32s(got); err != nil {
			t.Fatal(err)
		}
		size := len(tt.Data) / n
		for _, i := range []int{0, 1, parallelDecodeMin - 1, parallelDecodeMin, n / 2, n/2 + 1, 2*n/3 + 1, n - 1} {
			one := &Tensor{Name: "w", DType: dtype, Shape: []int{1}, Data: tt.Data[i*size : (i+1)*size]}
			want, err := one.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			if got[i] != want[0] {
				t.Errorf("%s: element %d = %g, alone it decodes to %g", dtype, i, got[i], want[0])
			}
		}
		for i := range got {
			if math.Abs(float64(got[i]-in[i])) > 0.01*(1+math.Abs(float64(in[i]))) {
				t.Fatalf("%s: element %d = %g, stored from %g", dtype, i, got[i], in[i])
			}
		}
		if err := tt.DecodeFloat32s(make([]float32, n-1)); err == nil {
			t.Errorf("%s: decoded %d values into %d without error", dtype, n, n-1)
		}
	}
}
