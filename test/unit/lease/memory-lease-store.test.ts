import { MemoryLeaseStore } from "../../../lib/lease/memory-lease-store";
import { describeLeaseStoreRules } from "../../support/contracts/lease-store-rules";

describeLeaseStoreRules("in memory", () => new MemoryLeaseStore());
