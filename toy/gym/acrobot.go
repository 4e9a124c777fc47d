package gym

import (
	"math"

	"github.com/posttrain/posttrain/internal/pyrand"
)

// Constants of AcrobotEnv (book dynamics, torque_noise_max 0). The masses, lengths, centres of
// mass and inertias (1, 1, 0.5, 1) are exact in binary; g, π-multiples and dt/6 are variables so
// that they round as Python's float arithmetic does.
var (
	acG        = 9.8
	acPi       = math.Pi
	acDt       = 0.2
	acMaxVel1  = 4 * acPi
	acMaxVel2  = 9 * acPi
	acTorque   = [3]float64{-1.0, 0.0, +1}
	acPiHalf   = acPi / 2.0
	acResetLow = -0.1
	acResetHi  = 0.1
)

// acrobot is AcrobotEnv with its default book_or_nips = "book".
type acrobot struct {
	s [4]float64 // θ1, θ2, θ̇1, θ̇2
}

func (a *acrobot) state() []float64 { return a.s[:] }

// reset: self.state = np_random.uniform(-0.1, 0.1, size=(4,)).astype(np.float32).
func (a *acrobot) reset(rng *Generator) []float32 {
	for i, u := range rng.Uniform(acResetLow, acResetHi, 4) {
		a.s[i] = float64(float32(u))
	}
	return a.observation()
}

// step: rk4 over [0, dt] of the state augmented with the torque, then wrap the angles to
// [−π, π] and bound the velocities; reward −1 until the tip is above the bar (then 0).
func (a *acrobot) step(action int) ([]float32, float64, bool) {
	y0 := [5]float64{a.s[0], a.s[1], a.s[2], a.s[3], acTorque[action]}
	ns := rk4(y0, acDt)
	ns[0] = wrap(ns[0], -acPi, acPi)
	ns[1] = wrap(ns[1], -acPi, acPi)
	ns[2] = bound(ns[2], -acMaxVel1, acMaxVel1)
	ns[3] = bound(ns[3], -acMaxVel2, acMaxVel2)
	copy(a.s[:], ns[:4])
	terminated := a.terminal()
	reward := -1.0
	if terminated {
		reward = 0.0
	}
	return a.observation(), reward, terminated
}

// observation is [cos θ1, sin θ1, cos θ2, sin θ2, θ̇1, θ̇2] as float32.
func (a *acrobot) observation() []float32 {
	s1, c1 := pyrand.SinCos(a.s[0])
	s2, c2 := pyrand.SinCos(a.s[1])
	return toFloat32([]float64{c1, s1, c2, s2, a.s[2], a.s[3]})
}

// terminal: −cos θ1 − cos(θ2 + θ1) > 1.
func (a *acrobot) terminal() bool {
	_, c1 := pyrand.SinCos(a.s[0])
	_, c12 := pyrand.SinCos(a.s[1] + a.s[0])
	return -c1-c12 > 1.0
}

// dsdt is AcrobotEnv._dsdt (book): m1 = m2 = l1 = I1 = I2 = 1, lc1 = lc2 = 0.5, so the constant
// factors below are Python's products of them (exact); the operation order is Python's.
func dsdt(s [5]float64) [5]float64 {
	theta1, theta2, dtheta1, dtheta2, torque := s[0], s[1], s[2], s[3], s[4]
	sin2, cos2 := pyrand.SinCos(theta2)
	_, cosPhi2 := pyrand.SinCos(theta1 + theta2 - acPiHalf)
	_, cosPhi1 := pyrand.SinCos(theta1 - acPiHalf)
	// d1 = m1·lc1² + m2·(l1² + lc2² + 2·l1·lc2·cos θ2) + I1 + I2
	d1 := ((0.25 + (1.25 + cos2)) + 1.0) + 1.0
	// d2 = m2·(lc2² + l1·lc2·cos θ2) + I2
	d2 := (0.25 + float64(0.5*cos2)) + 1.0
	// φ2 = m2·lc2·g·cos(θ1 + θ2 − π/2)
	phi2 := float64(float64(0.5*acG) * cosPhi2)
	// φ1 = −m2·l1·lc2·θ̇2²·sin θ2 − 2·m2·l1·lc2·θ̇2·θ̇1·sin θ2 + (m1·lc1 + m2·l1)·g·cos(θ1 − π/2) + φ2
	phi1 := float64(float64(-0.5*float64(dtheta2*dtheta2))*sin2) -
		float64(float64(dtheta2*dtheta1)*sin2) +
		float64(float64(1.5*acG)*cosPhi1) + phi2
	// θ̈2 = (a + d2/d1·φ1 − m2·l1·lc2·θ̇1²·sin θ2 − φ2) / (m2·lc2² + I2 − d2²/d1)   (book)
	ddtheta2 := (torque + float64((d2/d1)*phi1) - float64(float64(0.5*float64(dtheta1*dtheta1))*sin2) - phi2) /
		(1.25 - float64(d2*d2)/d1)
	// θ̈1 = −(d2·θ̈2 + φ1) / d1
	ddtheta1 := -(float64(d2*ddtheta2) + phi1) / d1
	return [5]float64{dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0}
}

// rk4 is acrobot.py's rk4(derivs, y0, [0, dt]): one classical Runge-Kutta step, elementwise in
// numpy's order: y0 + dt/6·(((k1 + 2·k2) + 2·k3) + k4).
func rk4(y0 [5]float64, dt float64) [5]float64 {
	dt2 := dt / 2.0
	axpy := func(h float64, k [5]float64) [5]float64 {
		var out [5]float64
		for i := range out {
			out[i] = y0[i] + float64(h*k[i])
		}
		return out
	}
	k1 := dsdt(y0)
	k2 := dsdt(axpy(dt2, k1))
	k3 := dsdt(axpy(dt2, k2))
	k4 := dsdt(axpy(dt, k3))
	h := dt / 6.0
	var out [5]float64
	for i := range out {
		sum := ((k1[i] + float64(2*k2[i])) + float64(2*k3[i])) + k4[i]
		out[i] = y0[i] + float64(h*sum)
	}
	return out
}

// wrap is acrobot.py's wrap(x, m, M): shift by M − m until m ≤ x ≤ M.
func wrap(x, m, M float64) float64 {
	diff := M - m
	for x > M {
		x -= diff
	}
	for x < m {
		x += diff
	}
	return x
}

// bound is acrobot.py's bound(x, m, M) = min(max(x, m), M) with Python's builtins.
func bound(x, m, M float64) float64 {
	if m > x {
		x = m
	}
	if M < x {
		x = M
	}
	return x
}
