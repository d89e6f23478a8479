"""A hybrid host's fusion setting: :class:`FusionConfig` and the default grid searched."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import CalibrationError

#: Fusion methods: ``zscore`` (LlamaIndex ``dist_based_score``) and ``minmax`` (``relative_score``).
FUSION_METHODS = ("zscore", "minmax")


@dataclass(frozen=True)
class FusionConfig:
    """One hybrid setting: score normalisation ``method`` and the dense retriever's ``weight``.

    The lexical (BM25) retriever gets ``1 - weight``.

    Examples
    --------
    >>> FusionConfig("minmax", 0.3).key
    'minmax:0.3'
    >>> FusionConfig.parse("zscore:0.5")
    FusionConfig(method='zscore', weight=0.5)
    """

    method: str
    weight: float

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise CalibrationError(f"Fusion method must be one of {FUSION_METHODS}, got {self.method!r}.")
        if not 0.0 <= float(self.weight) <= 1.0:
            raise CalibrationError(f"Fusion weight must be in [0, 1], got {self.weight}.")

    @property
    def key(self) -> str:
        """``"method:weight"``, as in reports and the CLI."""
        return f"{self.method}:{self.weight:g}"

    @classmethod
    def parse(cls, text: str) -> FusionConfig:
        """Inverse of :attr:`key`."""
        method, sep, weight = text.partition(":")
        if not sep:
            raise CalibrationError(f"Expected 'method:weight' such as 'zscore:0.5', got {text!r}.")
        try:
            value = float(weight)
        except ValueError as exc:
            raise CalibrationError(f"Bad fusion weight in {text!r}.") from exc
        return cls(method.strip(), value)


#: The small grid searched by default: both normalisations, dense weight 0.3 / 0.5 / 0.7.
DEFAULT_FUSION_GRID: tuple[FusionConfig, ...] = tuple(
    FusionConfig(m, w) for m in FUSION_METHODS for w in (0.3, 0.5, 0.7)
)
