package reward

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
)

// Loss is the Bradley-Terry loss of TRL's RewardTrainer.compute_loss (reward_trainer.py v0.24)
// over B pairs of scalar rewards [B]:
//
//	L = mean_i −log σ(r_c,i − r_r,i − m_i) + c · mean_i (r_c,i + r_r,i)²
//
// m the optional per-pair margin column (zeros when the data has none: the same loss), c
// center_rewards_coefficient (arXiv:2312.09244 eq. 2; 0 = off). −log σ(z) is softplus(−z),
// stable for large |z|.
func Loss(chosen, rejected, margin *Node, center float64) *Node {
	z := Sub(Sub(chosen, rejected), margin)
	loss := ReduceAllMean(Softplus(Neg(z)))
	if center != 0 {
		loss = Add(loss, MulScalar(ReduceAllMean(Square(Add(chosen, rejected))), center))
	}
	return loss
}

// Metrics are the scalars RewardTrainer logs per batch (reward_trainer.py v0.24 L558-573):
// accuracy = mean(r_c > r_r), margin = mean(r_c − r_r), and min/mean/max over all 2B rewards.
func Metrics(chosen, rejected *Node) map[string]*Node {
	chosen, rejected = StopGradient(chosen), StopGradient(rejected)
	all := Concatenate([]*Node{chosen, rejected}, 0)
	return map[string]*Node{
		"accuracy":    ReduceAllMean(ConvertDType(GreaterThan(chosen, rejected), chosen.DType())),
		"margin":      ReduceAllMean(Sub(chosen, rejected)),
		"min_reward":  ReduceAllMin(all),
		"mean_reward": ReduceAllMean(all),
		"max_reward":  ReduceAllMax(all),
	}
}
