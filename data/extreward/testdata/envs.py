# Environments for data/extreward's and trainers/grpo's tests (grpo --environment FILE.py:Class):
# TRL 1.x's environment_factory classes. Counter.add's schema is checked against transformers'
# get_json_schema (testdata/tool_schemas.json, scripts/reference/tool_schemas.py).


class Counter:
    """A counter the model moves towards a target with its add tool."""

    def __init__(self):
        self.value, self.target = 0, 0

    def reset(self, target=3, **kwargs):
        self.value, self.target = 0, int(target)
        return f" Reach {self.target}."

    def add(self, n: int) -> str:
        """Adds n to the counter.

        Args:
            n: How much to add.
        """
        if n > 100:
            raise ValueError("at most 100 at a time")
        self.value += n
        return str(self.value)

    def get_reward(self):
        return 1.0 if self.value == self.target else 0.0

    def _hidden(self):
        return "not a tool"


class Silent:
    """An environment with no observation and no reward of its own."""

    def reset(self, **kwargs):
        return None

    def ping(self) -> str:
        """Answers pong."""
        return "pong"


class NoReset:
    def step(self) -> str:
        """Does nothing."""
        return ""


class BadReset:
    def reset(self, **kwargs):
        raise RuntimeError("cannot reset")
