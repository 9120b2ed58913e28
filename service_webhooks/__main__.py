"""``python -m service_webhooks``: the ``service-webhooks`` command (the ``cli`` extra)."""

from service_webhooks.cli import main

main(prog_name="service-webhooks")
