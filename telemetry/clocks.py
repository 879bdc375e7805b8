"""Maximum (boost) SM clocks of card models, MHz, from NVIDIA's published datasheets.

The MFU proxy scales tensor activity by SM clock ÷ this clock (docs/telemetry.md). Keys are
the catalog's model names; a card missing here has no MFU proxy (null, with the reason).
"""

MAX_SM_CLOCK_MHZ: dict[str, float] = {
    "V100 SXM2 32GB": 1530,
    "A10": 1695,
    "A100 SXM4 40GB": 1410,
    "A100 SXM4 80GB": 1410,
    "A100 PCIe 40GB": 1410,
    "A800 SXM4 80GB": 1410,
    "H100 SXM5 80GB": 1980,
    "H100 PCIe 80GB": 1755,
    "H800 SXM5 80GB": 1980,
    "H200 SXM 141GB": 1980,
    "GH200 96GB": 1980,
    "L40S": 2520,
    "L40": 2490,
    "L4": 2040,
}
NO_MAX_CLOCK = "no published maximum SM clock for this card model"


def model_key(name: str) -> str:
    """The card's family word (``H100``, ``A100``, ``L40S``) for the modelName check."""
    for word in name.upper().replace("-", " ").split():
        if any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word):
            return word
    return name.upper()


def model_matches(model_name: str, accelerator_name: str) -> bool:
    """dcgm-exporter's modelName (``NVIDIA H100 80GB HBM3``) names the catalog card's family."""
    words = model_name.upper().replace("-", " ").split()
    return model_key(accelerator_name) in words
