package capgate.deny.strict

import data.capgate.settings

deny contains {"capability": "*", "reason": "x"} if false
