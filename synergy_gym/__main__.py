import sys

from synergy_gym.cli import main

sys.exit(main())
