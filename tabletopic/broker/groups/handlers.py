"""Where ``broker/component.py`` still imports the consumer-group handler table from.

The handlers themselves live in ``broker/handlers/`` (one module per API, like every other API);
this re-export goes once the component imports :data:`tabletopic.broker.handlers.GROUP_HANDLERS`.
"""

from tabletopic.broker.handlers import GROUP_HANDLERS

__all__ = ["GROUP_HANDLERS"]
