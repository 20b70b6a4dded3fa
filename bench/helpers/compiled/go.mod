module choria-serverless-provisioner/bench/helpers/compiled

go 1.21
