/**
 * A request body already serialized as JSON: the transport sends `json` as
 * it is instead of calling `JSON.stringify` on an object. The evaluate
 * coalescer serializes each event once, when it is queued (to count its
 * bytes and to fail an unserializable one alone), and joins the texts.
 */
export class EncodedBody {
  readonly json: string;

  constructor(json: string) {
    this.json = json;
  }
}
