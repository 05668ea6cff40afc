from openenv.core.env_server.http_server import create_app

from ..models import BannerAction, BannerObservation
from .banner_environment import BannerEnvironment

app = create_app(BannerEnvironment, BannerAction, BannerObservation, env_name="banner")
