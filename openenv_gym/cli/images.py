"""`openenv-gym images list | clean [--all]`: the images imports built in the container engines (Harbor tasks',
OpenEnv projects'), and the files exported from them for sandboxes. Clean removes only what this home's imports
built (OPENENV_GYM_HOME): another home's, or an import still running elsewhere, keep theirs."""

from __future__ import annotations

import argparse


def add_images(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("images", help="list or clean the container images imports built (Harbor tasks', "
                                                 "OpenEnv projects')")
    actions = parser.add_subparsers(required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="each image: its engine, size, and the environments that use it")
    listing.set_defaults(run=_run_list)
    clean = actions.add_parser("clean", help="remove the images this home's imports built that no registered "
                                             "environment uses, and the files exported from them")
    clean.add_argument("--all", action="store_true", help="remove every image this home's imports built (an "
                                                          "environment that uses one then needs importing again)")
    clean.set_defaults(run=_run_clean)


def _run_list(args: argparse.Namespace) -> None:
    from openenv_gym.manifests import all_manifests
    from openenv_gym.manifests.images import exported_dir, list_images

    found = list_images(all_manifests())
    if not found:
        print("no images of ours in the container engines that answer here")
        return
    for image in found:
        users = ", ".join(image["envs"]) or ("unused" if image["ours"] else "not built by this home's imports")
        exported = f"; exported to {', '.join(map(str, image['exported']))}" if image["exported"] else ""
        print(f"{image['engine']:7} {image['tag']:50} {image['size']:>10}  {users}{exported}")
    print(f"{len(found)} images; their exported files in {exported_dir()}; `openenv-gym images clean` removes the "
          "unused ones this home built")


def _run_clean(args: argparse.Namespace) -> None:
    from openenv_gym.manifests import all_manifests
    from openenv_gym.manifests.images import clean_images

    removed = clean_images(all_manifests(), everything=args.all)
    for image in removed:
        users = f", used by {', '.join(image['envs'])}" if image["envs"] else ""
        print(f"removed {image['engine']} {image['tag']} ({image['size']}{users})")
    print(f"removed {len(removed)} images")
