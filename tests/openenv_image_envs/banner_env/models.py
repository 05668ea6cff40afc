from openenv.core.env_server.types import Action, Observation


class BannerAction(Action):
    text: str


class BannerObservation(Observation):
    banner: str = ""
