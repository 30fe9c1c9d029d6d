"""What K-FAC needs to see of a network: each ``nn.Linear``'s inputs and output gradients.

K-FAC (Martens & Grosse 2015; Zhang et al. 2018, eq. 3 and 12) factors a layer's Fisher
block into the second moments of the layer's input activations a and of the gradients
Ds of the loss w.r.t. its outputs s = W a + b. Neither is available from ``p.grad``
(which only holds their product summed over the minibatch), so they are recorded with
module hooks: the user's network stays as it is, but it must be run by calling its
modules (``nn.Module.__call__``, ``torch.func.functional_call``), which fire hooks.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class LinearLayerRecorder:
    """Keeps the last (input, output-gradient) pair of every layer in ``layers``.

    Only forward passes that build a graph are recorded (``torch.no_grad`` rollouts and
    evaluations are ignored), and only while :attr:`active` — K-FAC reads the statistics
    every T_stats steps and need not keep references in between. Inputs and gradients are
    flattened to rows: ``(rows, in_features)`` and ``(rows, out_features)``.
    """

    def __init__(self, layers: list[nn.Linear]) -> None:
        self.active = True
        self.inputs: dict[int, Tensor] = {}
        self.output_grads: dict[int, Tensor] = {}
        for i, layer in enumerate(layers):
            layer.register_forward_hook(self._forward_hook(i))

    def _forward_hook(self, index: int):
        def hook(module: nn.Linear, inputs: tuple[Tensor, ...], output: Tensor) -> None:
            if not (self.active and torch.is_grad_enabled() and output.requires_grad):
                return
            self.inputs[index] = inputs[0].detach().reshape(-1, module.in_features)
            self.output_grads.pop(index, None)

            def save_grad(grad: Tensor) -> None:
                self.output_grads[index] = grad.detach().reshape(-1, module.out_features)

            output.register_hook(save_grad)

        return hook

    def scale_output_grads_(self, factor: float) -> None:
        """Scale the recorded output gradients, as if the loss had been ``factor`` × it."""
        for index, grads in self.output_grads.items():
            self.output_grads[index] = grads * factor  # new tensors: autograd's stay as they are

    def pop(self, index: int) -> tuple[Tensor, Tensor] | None:
        """The recorded (a, Ds) of layer ``index`` and forget them; None if incomplete."""
        inputs = self.inputs.pop(index, None)
        grads = self.output_grads.pop(index, None)
        if inputs is None or grads is None:
            return None
        return inputs, grads


def linear_layers(module: nn.Module) -> list[nn.Linear]:
    """The ``nn.Linear`` layers of ``module`` in registration (= forward) order: the layers
    K-FAC observes, and the layers an initialisation scheme sets."""
    return [m for m in module.modules() if isinstance(m, nn.Linear)]
