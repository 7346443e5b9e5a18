"""Print the team service's OpenAPI schema (sorted JSON): `npm run gen` turns it into the
TypeScript types of the web UI's API client, so a renamed field breaks the build."""

import json
import sys

from agentica_team.app import create_app
from agentica_team.settings import TeamSettings

if __name__ == "__main__":
    schema = create_app(TeamSettings(database_url="sqlite://")).openapi()
    sys.stdout.write(json.dumps(schema, indent=1, sort_keys=True) + "\n")
