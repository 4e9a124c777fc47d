package gym

import (
	"math"

	"github.com/posttrain/posttrain/internal/pyrand"
)

// Constants of CartPoleEnv.__init__, computed at run time in float64 as Python does (a Go
// constant expression would be exact, then rounded once, and could differ in the last bit).
var (
	cpGravity       = 9.8
	cpMassCart      = 1.0
	cpMassPole      = 0.1
	cpTotalMass     = cpMassPole + cpMassCart
	cpLength        = 0.5 // half the pole's length
	cpPoleMassLen   = cpMassPole * cpLength
	cpForceMag      = 10.0
	cpTau           = 0.02
	cpThetaThresh   = float64(12*2) * cpPi / 360 // 12 * 2 * math.pi / 360
	cpXThreshold    = 2.4
	cpFourThirds    = 4.0 / 3.0
	cpPi            = math.Pi
	cpResetLow      = -0.05
	cpResetHigh     = 0.05
	cpStepsBeyondNo = -1
)

// cartPole is CartPoleEnv (sutton_barto_reward=False, kinematics_integrator "euler").
type cartPole struct {
	s                     [4]float64 // x, ẋ, θ, θ̇
	stepsBeyondTerminated int        // -1: None
}

func newCartPole() *cartPole { return &cartPole{stepsBeyondTerminated: cpStepsBeyondNo} }

func (c *cartPole) state() []float64 { return c.s[:] }

// reset: self.state = np_random.uniform(-0.05, 0.05, size=(4,)).
func (c *cartPole) reset(rng *Generator) []float32 {
	copy(c.s[:], rng.Uniform(cpResetLow, cpResetHigh, 4))
	c.stepsBeyondTerminated = cpStepsBeyondNo
	return toFloat32(c.s[:])
}

// step is CartPoleEnv.step, operation for operation (the float64() conversions forbid fused
// multiply-adds, which numpy does not do).
func (c *cartPole) step(action int) ([]float32, float64, bool) {
	x, xDot, theta, thetaDot := c.s[0], c.s[1], c.s[2], c.s[3]
	force := -cpForceMag
	if action == 1 {
		force = cpForceMag
	}
	sinTheta, cosTheta := pyrand.SinCos(theta)
	temp := (force + float64(float64(cpPoleMassLen*float64(thetaDot*thetaDot))*sinTheta)) / cpTotalMass
	thetaAcc := (float64(cpGravity*sinTheta) - float64(cosTheta*temp)) /
		(cpLength * (cpFourThirds - float64(cpMassPole*float64(cosTheta*cosTheta))/cpTotalMass))
	xAcc := temp - float64(float64(cpPoleMassLen*thetaAcc)*cosTheta)/cpTotalMass
	x += float64(cpTau * xDot) // euler
	xDot += float64(cpTau * xAcc)
	theta += float64(cpTau * thetaDot)
	thetaDot += float64(cpTau * thetaAcc)
	c.s = [4]float64{x, xDot, theta, thetaDot}
	terminated := x < -cpXThreshold || x > cpXThreshold || theta < -cpThetaThresh || theta > cpThetaThresh
	reward := 1.0
	if terminated {
		if c.stepsBeyondTerminated == cpStepsBeyondNo {
			c.stepsBeyondTerminated = 0 // the pole just fell: still +1
		} else {
			c.stepsBeyondTerminated++
			reward = 0.0
		}
	}
	return toFloat32(c.s[:]), reward, terminated
}
