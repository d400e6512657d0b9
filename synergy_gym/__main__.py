import sys

from synergy_gym.cli import console_main

sys.exit(console_main())
