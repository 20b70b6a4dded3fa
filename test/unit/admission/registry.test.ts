import { MemoryAdmissionStore } from "../../../lib/admission/memory-admission-store";
import { describeExpiryRules } from "./expiry-rules";
import { describeRegistryRules } from "./registry-rules";

describeRegistryRules("the in-memory store", () => new MemoryAdmissionStore());
describeExpiryRules("the in-memory store", () => new MemoryAdmissionStore());
