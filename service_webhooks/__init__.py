"""service-webhooks: receive the service's webhooks safely."""
