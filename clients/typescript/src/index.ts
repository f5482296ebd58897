// index.ts - charter-client: a TypeScript client of charterd over Connect/HTTP (JSON).
//
// createCharterClient gives one typed Connect client per service of charter.v1 (generated from
// proto/charter.proto by protoc-gen-es when the package is built); verdict reads a decision;
// verifyReceipt checks a receipt's HMAC offline. Every message type, schema and enum of the
// proto is exported as protoc-gen-es generated it (RunView, DeliverResponse, Outcome, ...).
export {
  charterHeaders,
  createCharterClient,
  services,
  type CharterClient,
  type CharterClientOptions,
  type Services,
} from "./client.js";
export {
  DecisionRefused,
  requireAllowed,
  Verdict,
  verdict,
  type DecisionFields,
  type HoldsDecision,
  type OutcomeName,
} from "./decision.js";
export { ReceiptInvalid, receiptText, verifyReceipt } from "./receipt.js";
export * from "./gen/charter_pb.js";
// Failed calls reject with ConnectError; its code is one of Code (Code.NotFound, ...).
export { Code, ConnectError, type CallOptions } from "@connectrpc/connect";
// protobuf-es's own helpers for the generated schemas: create(RunViewSchema, {...}),
// toJson(RunViewSchema, view) (the proto3 JSON charterd speaks), fromJson, isMessage.
export { create, fromJson, isMessage, toJson, toJsonString } from "@bufbuild/protobuf";
