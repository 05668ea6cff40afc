"""The atlas tool server: Verifiers starts it per rollout as `python -m capitals.servers.atlas`."""

import verifiers.v1 as vf

CAPITALS = {"france": "Paris", "japan": "Tokyo", "kenya": "Nairobi", "peru": "Lima"}


class AtlasToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "atlas"

    @vf.tool
    def capital(self, country: str) -> str:
        """The capital city of a country."""
        return CAPITALS.get(country.strip().lower(), "unknown country")


if __name__ == "__main__":
    AtlasToolset.run()
