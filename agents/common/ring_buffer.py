"""Preallocated tensors filled circularly, and their persistence: DDPG's replay buffer and
VIME's transition pool are both one (:class:`RingBuffer`)."""

from __future__ import annotations


class RingBuffer:
    """Preallocated tensors (the names in ``fields``) filled circularly; their persistence.

    Subclasses set ``fields`` and keep ``capacity``, ``position`` (the next row written) and
    ``size`` (the rows filled).
    """

    fields: tuple[str, ...] = ()
    capacity: int
    position: int
    size: int

    def __len__(self) -> int:
        return self.size

    def state_dict(self) -> dict:
        """The stored rows only (not the unused capacity)."""
        n = self.size
        state = {"capacity": self.capacity, "position": self.position, "size": n}
        return state | {key: getattr(self, key)[:n].clone() for key in self.fields}

    def load_state_dict(self, state: dict) -> None:
        if state["capacity"] != self.capacity:
            raise ValueError(
                f"saved buffer has capacity {state['capacity']}, this one {self.capacity}"
            )
        n = state["size"]
        for key in self.fields:
            target = getattr(self, key)
            target[:n] = state[key].to(target.device)
        self.size = n
        self.position = state["position"]
