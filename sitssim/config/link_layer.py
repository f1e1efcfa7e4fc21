"""The scenario's ``link_layer`` section (L2): one block per data-link mechanism.

Each block's models live with its mechanism; this module only gathers them, and must not
import ``sitssim.scenario`` at module level (the scenario module imports it).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sitssim.config.cdc_profile import CdcProfile
from sitssim.config.credit_profile import CreditProfile
from sitssim.config.flit_profile import FlitProfile


class LinkLayer(BaseModel):
    """Data-link parameters every link's devices implement (defaults: the spec's values)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Evaluated when present (``cdc: {}`` for the spec's defaults): the worst-case search
    # costs about a second per distinct FIFO design, which scenarios opt into.
    cdc: CdcProfile = Field(default_factory=CdcProfile.disabled)
    flit: FlitProfile = Field(default_factory=FlitProfile)
    credits: CreditProfile = Field(default_factory=CreditProfile)
