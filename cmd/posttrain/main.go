// Command posttrain post-trains language models (SFT, DPO, KTO, GRPO and its variants) with GoMLX,
// and reproduces the course's toy experiments (`posttrain toy ...`).
//
// Each subcommand lives in its own file and registers itself with addCommand from an init function.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/internal/backend"
)

// version is set with -ldflags "-X main.version=..." by release builds.
var version = "0.1.0-dev"

// commands holds the top-level subcommands registered by the files of this package.
var commands []*cli.Command

// addCommand registers a top-level subcommand; called from init functions.
func addCommand(c *cli.Command) { commands = append(commands, c) }

// freshFlags rebuilds a command's flags (by command name) for each newApp: urfave/cli keeps a
// flag's "set" state after a run, and the trainers' --config precedence (flags given explicitly
// win over the YAML) asks exactly that, so a second run in one process (the tests) saw the first
// run's flags as given.
var freshFlags = map[string]func() []cli.Flag{}

func newApp() *cli.Command {
	attachToys()
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	for _, c := range commands {
		if f, ok := freshFlags[c.Name]; ok {
			c.Flags = f()
		}
		setUsageErrors(c)
		boundIntFlags(c)
	}
	return &cli.Command{
		Name:                  "posttrain",
		Usage:                 "post-train language models (SFT, DPO, KTO, GRPO) in Go with GoMLX",
		Version:               version,
		Commands:              commands,
		EnableShellCompletion: false,
		OnUsageError: func(ctx context.Context, cmd *cli.Command, err error, isSubcommand bool) error {
			return usageError{fmt.Errorf("%s: %w", cmd.FullName(), err)}
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("unknown command %q; valid: %s", cmd.Args().First(), commandNames(commands))}
			}
			return cli.ShowAppHelp(cmd)
		},
	}
}

// setUsageErrors makes a bad flag value on any subcommand a one-line usage error (exit 2);
// urfave/cli v3 does not inherit the root's OnUsageError.
func setUsageErrors(c *cli.Command) {
	if c.OnUsageError == nil {
		c.OnUsageError = func(ctx context.Context, cmd *cli.Command, err error, isSubcommand bool) error {
			return usageError{fmt.Errorf("%s: %w", cmd.FullName(), err)}
		}
	}
	for _, sub := range c.Commands {
		setUsageErrors(sub)
	}
}

// usageError marks an error caused by bad command-line input (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func commandNames(cs []*cli.Command) string {
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ", ")
}

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run executes the CLI and returns the process exit status; errors are printed as one line.
func run(args []string, stdout, stderr *os.File) int {
	t0 := time.Now()
	defer writeCompileReport(stderr, t0)
	if stop := startCPUProfile(stderr); stop != nil {
		defer stop()
	}
	app := newApp()
	errw := &noticeWriter{w: stderr}
	app.Writer, app.ErrWriter = stdout, errw
	if err := checkCommand(app, args); err != nil {
		fmt.Fprintf(stderr, "posttrain: %s\n", err)
		return 2
	}
	args = hfBoolValues(app, args)
	if err := repeatedFlag(app, args); err != nil {
		fmt.Fprintf(stderr, "posttrain: %s: %s\n", commandOf(app, args).FullName(), err)
		return 2
	}
	err := app.Run(context.Background(), args)
	if err == nil {
		errw.flush()
		return 0
	}
	// Errors often start with the command's full name ("posttrain sft: ..."): print it once.
	msg := err.Error() + flagSuggestion(app, args, err.Error())
	fmt.Fprintf(stderr, "posttrain: %s\n", userPaths(onePrefix(strings.TrimPrefix(msg, "posttrain "))))
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// noticeWriter is the commands' stderr with one pending notice, the line saying which backend a
// command runs on (newBackend): it is written before anything else the command writes there (its
// first log line, say), or when the command succeeds having written nothing, and dropped when the
// command fails first, so that a refusal stays the one line of the error.
type noticeWriter struct {
	w      io.Writer
	mu     sync.Mutex
	notice string
}

// Notice sets the pending notice (a later one replaces an unwritten earlier one).
func (n *noticeWriter) Notice(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notice = line
}

func (n *noticeWriter) Write(p []byte) (int, error) {
	n.flush()
	return n.w.Write(p)
}

// Fd is the file descriptor of the stream under n when it is a file (the progress bar draws only
// on a terminal: runlog.NewProgress), else an invalid one.
func (n *noticeWriter) Fd() uintptr {
	if f, ok := n.w.(*os.File); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}

// flush writes the pending notice, if any.
func (n *noticeWriter) flush() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.notice != "" {
		fmt.Fprintln(n.w, n.notice)
		n.notice = ""
	}
}

// checkCommand refuses an unknown command before flags are parsed: urfave/cli would otherwise
// parse the unknown command's flags as the root's and answer "flag provided but not defined:
// -model" for `posttrain reward --model M`, naming neither the command nor the real ones.
func checkCommand(app *cli.Command, args []string) error {
	if len(args) < 2 || strings.HasPrefix(args[1], "-") {
		return nil
	}
	name := args[1]
	if name == "help" || name == "h" {
		return nil
	}
	for _, c := range app.Commands {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return nil
		}
	}
	return fmt.Errorf("unknown command %q; valid: %s (posttrain --help)", name, commandNames(app.Commands))
}

// CompileReportEnv names a file that receives, when the command ends, the process's graph
// compilations and the time spent in them beside the wall time (scripts/gpu-check.sh reports
// compile time apart from run time with it).
const CompileReportEnv = "POSTTRAIN_COMPILE_REPORT"

func writeCompileReport(stderr *os.File, t0 time.Time) {
	path := os.Getenv(CompileReportEnv)
	if path == "" {
		return
	}
	c := backend.Compiled()
	line := fmt.Sprintf("{\"graphs\": %d, \"compile_s\": %.3f, \"wall_s\": %.3f}\n", c.Graphs, c.Time.Seconds(), time.Since(t0).Seconds())
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		fmt.Fprintf(stderr, "posttrain: $%s: %v\n", CompileReportEnv, err)
	}
}

// CPUProfileEnv names a file that receives a CPU profile of the whole command (`go tool pprof -top
// bin/posttrain FILE`): where a run's time goes, on any backend, without a rebuild.
const CPUProfileEnv = "POSTTRAIN_CPUPROFILE"

// startCPUProfile starts the profile $POSTTRAIN_CPUPROFILE asks for and returns what stops and
// writes it; nil when the variable is unset or the file cannot be made (said on stderr: the
// command still runs).
func startCPUProfile(stderr *os.File) func() {
	path := os.Getenv(CPUProfileEnv)
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "posttrain: $%s: %v\n", CPUProfileEnv, err)
		return nil
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(stderr, "posttrain: $%s: %v\n", CPUProfileEnv, err)
		f.Close()
		return nil
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "posttrain: $%s: %v\n", CPUProfileEnv, err)
		}
	}
}
