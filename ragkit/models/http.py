"""The remote-model machinery under the name plugins first imported it by;
each part now lives in its own module of ``ragkit.models`` (see there).
"""

from ragkit.models import *  # noqa: F403
from ragkit.models import __all__  # noqa: F401
