package tinylm

// Phase11Result is train_grpo at the course's defaults, scored (the golden's keys).
type Phase11Result struct {
	Cfg         GRPOVariant   `json:"cfg"`
	Results     PromptResults `json:"results"`
	Logits      Logits        `json:"logits"`
	SamplesHead []Sample      `json:"samples_head"`
}

// RunGRPO trains with cfg and scores the result.
func RunGRPO(cfg GRPOConfig) Phase11Result {
	lm, ref, head := TrainGRPO(cfg)
	return NewGRPOResult(cfg.Variant, lm, ref, head)
}

// NewGRPOResult scores a model trained with variant v.
func NewGRPOResult(v GRPOVariant, lm, ref *TinyLM, head []Sample) Phase11Result {
	return Phase11Result{Cfg: v, Results: Evaluate(lm, ref), Logits: lm.Logits(), SamplesHead: head}
}

// Phase12Iterations is how long phase 12 trains each variant.
const Phase12Iterations = 30

// VariantResult is one variant of phase 12 (the golden's variants[name]).
type VariantResult struct {
	Name         string      `json:"-"`
	Cfg          GRPOVariant `json:"cfg"`
	PCorrect     Scores      `json:"p_correct"`
	KL           Scores      `json:"kl"`
	MeanPCorrect float64     `json:"mean_p_correct"` // mean over the prompts
	MeanKL       float64     `json:"mean_kl"`
	Logits       Logits      `json:"logits"`
	SamplesHead  []Sample    `json:"samples_head"`
}

// VariantResults marshals as {"<name>": {...}, ...} in order.
type VariantResults []VariantResult

// MarshalJSON writes the results keyed by variant name.
func (v VariantResults) MarshalJSON() ([]byte, error) {
	return marshalObject(len(v), func(i int) (string, any) { return v[i].Name, v[i] })
}

// Phase12Result is every variant of Variants trained for Phase12Iterations.
type Phase12Result struct {
	Iterations int            `json:"-"`
	Variants   VariantResults `json:"variants"`
}

// RunVariant trains variant v (named name) with cfg's loop sizes (cfg.Variant is replaced by v)
// and scores it.
func RunVariant(name string, v GRPOVariant, cfg GRPOConfig) VariantResult {
	cfg.Variant = v
	lm, ref, head := TrainGRPO(cfg)
	return NewVariantResult(name, v, lm, ref, head)
}

// NewVariantResult scores a model trained with variant v: P(answer) for every prompt, then the
// KL, their means over the prompts, then every row of lm.
func NewVariantResult(name string, v GRPOVariant, lm, ref *TinyLM, head []Sample) VariantResult {
	res := VariantResult{Name: name, Cfg: v, SamplesHead: head}
	for _, x := range Prompts {
		res.PCorrect = append(res.PCorrect, Score{x, PCorrect(lm, x)})
	}
	for _, x := range Prompts {
		res.KL = append(res.KL, Score{x, KL(lm, ref, x)})
	}
	res.MeanPCorrect = meanScores(res.PCorrect)
	res.MeanKL = meanScores(res.KL)
	res.Logits = lm.Logits()
	return res
}

// RunPhase12 runs every variant with phase 12's settings (DefaultGRPO, 30 iterations).
func RunPhase12() Phase12Result {
	cfg := DefaultGRPO()
	cfg.Iterations = Phase12Iterations
	res := Phase12Result{Iterations: cfg.Iterations}
	for _, v := range Variants {
		res.Variants = append(res.Variants, RunVariant(v.Name, v.Cfg, cfg))
	}
	return res
}

func meanScores(s Scores) float64 {
	t := 0.0
	for _, e := range s {
		t += e.Value
	}
	return t / float64(len(s))
}
