/** The broker user the bench publishes as (the AMQP URL's): the one `TRUSTED_PUBLISHERS` must name. */
/** The AMQP user of the first broker URL: the publisher the workers are told to trust. */
export function brokerUser(amqpUrl: string): string {
  const user = new URL(amqpUrl.split(',')[0] ?? amqpUrl).username;
  return user === '' ? 'guest' : decodeURIComponent(user);
}
