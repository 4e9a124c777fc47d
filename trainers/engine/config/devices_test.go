package config_test

import (
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/ppo"
	"github.com/posttrain/posttrain/trainers/sft"
)

// ResolveDevices: the default is every device of the backend, except one on the pure-Go backend,
// and on XLA's CPU plugin; a resolved 1 is stored as 0, so that
// training_args.yaml of a one-device run has no devices line; too many devices, and fsdp on the
// pure-Go backend or on one device, are refused naming the flag.
func TestResolveDevices(t *testing.T) {
	cases := []struct {
		method      string
		devices     int
		fsdp        bool
		have        int
		pureGo, cpu bool
		want        int
		err         string
	}{
		{method: "sft", have: 8, want: 8},
		{method: "dpo", have: 1, want: 0},
		{method: "sft", have: 4, cpu: true, want: 0},
		{method: "kto", have: 1, pureGo: true, want: 0},
		{method: "grpo", have: 8, want: 8},
		{method: "ppo", have: 8, want: 8},
		{method: "reward", devices: 2, have: 4, cpu: true, want: 2},
		{method: "sft", devices: 1, have: 8, want: 0},
		{method: "sft", devices: 4, fsdp: true, have: 4, cpu: true, want: 4},
		{method: "sft", devices: 5, have: 4, err: "devices (--devices) 5: the backend B has 4 devices"},
		{method: "sft", devices: 2, have: 1, pureGo: true, err: "devices (--devices) 2: the backend B has 1 device"},
		{method: "sft", fsdp: true, have: 1, pureGo: true, err: "fsdp (--fsdp) needs an XLA backend"},
		{method: "sft", fsdp: true, have: 4, cpu: true, err: "fsdp (--fsdp) splits the state over several devices: give --devices ≥ 2 (the backend B has 4)"},
	}
	for _, c := range cases {
		cfg, err := trainers.New(c.method)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Common().Devices, cfg.Common().FSDP = c.devices, c.fsdp
		err = config.ResolveDevices(cfg, "B", c.have, c.pureGo, c.cpu)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%+v: error %v, want %q", c, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case c.err == "" && cfg.Common().Devices != c.want:
			t.Errorf("%+v: devices %d, want %d", c, cfg.Common().Devices, c.want)
		}
	}
}

// A resume may change devices with per_device_train_batch_size when their product, the global
// micro-batch, is the same; another product is refused as a change of either. devices 0 is a
// resolved one-device run (config.ResolveDevices), and the refusal says 1: it said "4 → 0" to a user who
// had given --devices 1.
func TestResumeChanges_DevicesWithTheSameGlobalBatch(t *testing.T) {
	saved := sft.DefaultConfig()
	saved.Model, saved.Dataset, saved.OutputDir = "m", "d.jsonl", "/out"
	saved.PerDeviceTrainBatchSize, saved.Devices = 1, 4
	data, err := config.MarshalRun(saved)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		perDevice, devices int
		refused            string
	}{{4, 0, ""}, {2, 2, ""}, {1, 4, ""}, {2, 0, "per_device_train_batch_size 1 → 2; devices 4 → 1"}, {1, 2, "devices 4 → 2"}, {1, 0, "devices 4 → 1"}} {
		cur := *saved
		cur.PerDeviceTrainBatchSize, cur.Devices = c.perDevice, c.devices
		if got := refusedChanges(t, data, &cur); got != c.refused {
			t.Errorf("per device %d × %d devices: refused %q, want %q", c.perDevice, c.devices, got, c.refused)
		}
	}
}

// PPO's local_rollout_forward_batch_size is per device as well: a resume on another device count
// keeping per device × devices is accepted, one that changes the rollout's forward pass (alone or
// with the devices) is refused.
func TestResumeChanges_PPOForwardRowsPerDevice(t *testing.T) {
	saved := ppo.DefaultConfig()
	saved.Model, saved.Dataset, saved.OutputDir, saved.RewardModelPath = "m", "d.jsonl", "/out", "rm"
	saved.PerDeviceTrainBatchSize, saved.LocalRolloutForwardBatchSize, saved.Devices = 1, 2, 4
	data, err := config.MarshalRun(saved)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		perDevice, local, devices int
		refused                   string
	}{{2, 4, 2, ""}, {4, 8, 0, ""}, {1, 2, 4, ""}, {1, 4, 4, "local_rollout_forward_batch_size 2 → 4"},
		{2, 2, 2, "per_device_train_batch_size 1 → 2; devices 4 → 2"}} {
		cur := *saved
		cur.PerDeviceTrainBatchSize, cur.LocalRolloutForwardBatchSize, cur.Devices = c.perDevice, c.local, c.devices
		if got := refusedChanges(t, data, &cur); got != c.refused {
			t.Errorf("per device %d, forward %d × %d devices: refused %q, want %q", c.perDevice, c.local, c.devices, got, c.refused)
		}
	}
}

// refusedChanges is config.ResumeChanges' refused options of cur against the saved training_args.yaml,
// joined with "; ".
func refusedChanges(t *testing.T, saved []byte, cur config.Config) string {
	t.Helper()
	refused, _, err := config.ResumeChanges(saved, "training_args.yaml", cur)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range refused {
		got = append(got, ch.String())
	}
	return strings.Join(got, "; ")
}
