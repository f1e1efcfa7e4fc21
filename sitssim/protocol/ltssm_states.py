"""The LTSSM's states (PCIe's names), as the ``link_states`` table records them.

Apart from the machine (``sitssim.phy.ltssm``) so the PHY clauses can name a state without
importing the model.
"""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    DETECT_QUIET = "Detect.Quiet"
    DETECT_ACTIVE = "Detect.Active"
    POLLING_ACTIVE = "Polling.Active"
    POLLING_CONFIGURATION = "Polling.Configuration"
    CONFIG_LINKWIDTH_START = "Configuration.Linkwidth.Start"
    CONFIG_LINKWIDTH_ACCEPT = "Configuration.Linkwidth.Accept"
    CONFIG_LANENUM_WAIT = "Configuration.Lanenum.Wait"
    CONFIG_LANENUM_ACCEPT = "Configuration.Lanenum.Accept"
    CONFIG_COMPLETE = "Configuration.Complete"
    CONFIG_IDLE = "Configuration.Idle"
    RECOVERY_RCVRLOCK = "Recovery.RcvrLock"
    EQ_PHASE0 = "Recovery.Equalization.Phase0"
    EQ_PHASE1 = "Recovery.Equalization.Phase1"
    EQ_PHASE2 = "Recovery.Equalization.Phase2"
    EQ_PHASE3 = "Recovery.Equalization.Phase3"
    RECOVERY_RCVRCFG = "Recovery.RcvrCfg"
    RECOVERY_IDLE = "Recovery.Idle"
    L0 = "L0"
    HOT_RESET = "Hot Reset"
    DISABLED = "Disabled"
