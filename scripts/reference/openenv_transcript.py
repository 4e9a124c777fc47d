"""What a real OpenEnv server (openenv-core, requirements-openenv.txt) answers to the messages
posttrain's --environment-url client sends: data/extreward/testdata/openenv/transcript.json.

The environment is data/extreward's test environment, Multiply (its Go twin is openenvFake in
data/extreward/openenv_test.go): reset(a, b) asks for a×b; step(answer) rewards 1.0 for the
product and ends the episode, 0.0 otherwise, and ends it after three answers. The server is
openenv-core's own create_app under uvicorn, two sessions at most. The script records its
/metadata, its /schema and, on WebSocket sessions, each message sent and each answer received, in
order: an episode with a wrong answer, an action that fails validation, a right answer and a step
after the end; a second episode on the same session; a third session, past the server's
capacity (answered before any message). The Go
test replays the requests to its twin and requires the same answers, then runs posttrain's
client against the twin.

  .venv-reference/openenv/bin/python scripts/reference/openenv_transcript.py [--out TREE]
  .venv-reference/openenv/bin/python scripts/reference/openenv_transcript.py --serve PORT [MAX_SESSIONS]

The first writes TREE/data/extreward/openenvtest/testdata/transcript.json (TREE: the repository
by default; make reference runs it through scripts/reference/run.sh); the second only serves, as
data/extreward's TestOpenEnv_Client runs it where this venv exists.
"""

import json
import os
import socket
import sys
import threading
import time
import urllib.request

import uvicorn
from pydantic import Field
from websockets.sync.client import connect

from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State


class AnswerAction(Action):
    """Answers the multiplication question."""

    answer: int = Field(..., description="the product")


class MultiplyObservation(Observation):
    """The question, or what became of an answer."""

    message: str = Field(default="", description="what the environment says")


class Multiply(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id="", step_count=0)
        self.a = self.b = 0

    def reset(self, a: int = 0, b: int = 0, seed=None, episode_id=None, **kwargs) -> MultiplyObservation:
        self.a, self.b = int(a), int(b)
        self._state = State(episode_id=episode_id or "", step_count=0)
        return MultiplyObservation(message=f"What is {self.a} times {self.b}?", done=False, reward=None)

    def step(self, action: AnswerAction, timeout_s=None, **kwargs) -> MultiplyObservation:
        self._state.step_count += 1
        if action.answer == self.a * self.b:
            return MultiplyObservation(message="Correct.", done=True, reward=1.0)
        done = self._state.step_count >= 3
        return MultiplyObservation(message=f"{action.answer} is wrong.", done=done, reward=0.0)

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="multiply", description="Asks for a product of two integers.", version="1.0.0")


def app(max_sessions):
    return create_app(Multiply, AnswerAction, MultiplyObservation, env_name="multiply", max_concurrent_envs=max_sessions)


def serve(port, max_sessions, log_level="warning"):
    uvicorn.run(app(max_sessions), host="127.0.0.1", port=port, log_level=log_level)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(base):
    for _ in range(200):
        try:
            urllib.request.urlopen(base + "/health", timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server did not start")


def get(base, path):
    return json.loads(urllib.request.urlopen(base + path, timeout=10).read())


def session(ws_url, messages):
    """Each message sent and its answer."""
    out = []
    with connect(ws_url, open_timeout=10) as ws:
        for m in messages:
            ws.send(json.dumps(m))
            out.append({"send": m, "receive": json.loads(ws.recv(timeout=10))})
        ws.send(json.dumps({"type": "close"}))
    return out


REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
ROW = {"a": 12, "b": 34, "prompt": [{"role": "user", "content": "Use the step tool."}], "answer": "408"}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 8)
        return
    tree = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--out" else REPO
    out_dir = os.path.join(tree, "data", "extreward", "openenvtest", "testdata")
    port = free_port()
    threading.Thread(target=serve, args=(port, 2, "critical"), daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    wait(base)
    ws_url = f"ws://127.0.0.1:{port}/ws"
    first = [
        {"type": "reset", "data": ROW},
        {"type": "step", "data": {"answer": 400}},
        {"type": "step", "data": {"answer": "four hundred"}},
        {"type": "step", "data": {"answer": 408}},
        {"type": "reset", "data": {"a": 7, "b": 6, "prompt": "seven times six"}},
        {"type": "step", "data": {"answer": 41}},
        {"type": "step", "data": {}},
        {"type": "step", "data": {"answer": 40}},
        {"type": "step", "data": {"answer": 39}},
    ]
    transcript = {
        "metadata": get(base, "/metadata"),
        "schema": get(base, "/schema"),
        "sessions": [session(ws_url, first)],
    }
    # Two sessions open at once (the server's capacity), then a third.
    with connect(ws_url, open_timeout=10) as a, connect(ws_url, open_timeout=10) as b:
        time.sleep(0.2)
        with connect(ws_url, open_timeout=10) as c:  # the server answers before any message, and closes
            transcript["past_capacity"] = json.loads(c.recv(timeout=10))
        for ws in (a, b):
            ws.send(json.dumps({"type": "close"}))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "transcript.json"), "w") as f:
        json.dump(transcript, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
