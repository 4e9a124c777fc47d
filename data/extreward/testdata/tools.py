# Tools for data/extreward's tests (grpo --tools FILE.py:FUNC): their schemas are checked against
# transformers' get_json_schema (testdata/tool_schemas.json, scripts/reference/tool_schemas.py).
import time
from enum import Enum
from typing import Literal, Optional, Union


class Unit(Enum):
    CM = "cm"
    INCH = "inch"


def multiply(a: int, b: int) -> int:
    """
    Multiplies two integers.

    Args:
        a: The first factor.
        b: The second factor.

    Returns:
        The product.
    """
    return a * b


def lookup(key: str, default: float = 0.5, tags: list[str] | None = None) -> str:
    """Looks a key up in the table.

    Args:
        key: The key to look up
            (case-sensitive).
        default: What to return when absent.
        tags: Optional tags.
    """
    return {"pi": "3.14"}.get(key, str(default))


def convert(value: float, unit: Unit, mode: Literal["round", "floor"] = "round", extra: Optional[dict[str, int]] = None,
            pair: tuple[int, str] = (1, "a"), either: Union[int, str] = 0, drink: str = "tea") -> dict:
    """Converts a length.

    Args:
        value (float): The length.
        unit: Its unit.
        mode: How to round.
        extra: Anything else.
        pair: A pair.
        either: An int or a string.
        drink: A drink (choices: ["tea", "coffee"])

    Raises:
        ValueError: never.
    """
    return {"value": value, "unit": unit}


def fails(x: int) -> str:
    """Always raises.

    Args:
        x: Ignored.
    """
    raise ValueError(f"no value for {x}")


def slow(seconds: float) -> str:
    """Sleeps.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return "awake"
